import { el, clear, fmtInt } from './dom.js';

const listeners = [];
let source = null;

// onLive subscribes to the server-sent live feed (one EventSource per page).
export function onLive(fn) {
  listeners.push(fn);
  start();
}

export function start() {
  if (source || document.body.dataset.live !== 'true') return;
  source = new EventSource('/api/live');
  source.addEventListener('live', (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    renderPipeline(ev.pipeline);
    for (const fn of listeners) fn(ev);
  });
  source.addEventListener('error', () => {
    const box = document.getElementById('pipeline');
    if (box) box.classList.add('stale');
  });
  source.addEventListener('open', () => {
    const box = document.getElementById('pipeline');
    if (box) box.classList.remove('stale');
  });
}

// The header's health strip: capture drops, evictions and store back-log
// are always visible in live mode, red when not zero.
export function renderPipeline(p) {
  const box = document.getElementById('pipeline');
  if (!box || !p) return;
  box.hidden = false;
  clear(box);
  const item = (name, label, v) => el('span', { class: 'pl' + (v > 0 ? ' warn' : ''), dataset: { stat: name, value: v } }, label + ' ', el('b', {}, fmtInt(v)));
  box.append(
    item('capture_drops', 'capture drops', p.capture_drops + (p.interface_drops || 0)),
    ...(p.capture_freezes > 0 ? [item('capture_freezes', 'ring freezes', p.capture_freezes)] : []),
    item('evictions', 'evictions', p.evictions),
    item('store_backlog', 'store back-log', p.store_queued),
    el('span', { class: 'pl' }, 'packets ', el('b', {}, fmtInt(p.packets))),
  );
  // The state says what is wrong now; a last error alone may be old.
  if (p.store_state) box.append(el('span', { class: 'pl warn', dataset: { stat: 'store_state' }, title: p.store_last_error || '' }, 'store ' + p.store_state));
  else if (p.store_last_error) box.append(el('span', { class: 'pl warn', title: p.store_last_error }, 'store error'));
}
