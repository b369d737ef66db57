import { el, params, setParams, classLabel } from './dom.js';

export const ranges = [
  ['all', 'All data'], ['5m', 'Last 5 min'], ['15m', 'Last 15 min'], ['1h', 'Last hour'],
  ['6h', 'Last 6 hours'], ['24h', 'Last 24 hours'], ['7d', 'Last 7 days'], ['custom', 'Custom…'],
];

// Range picker: "last" is relative to the newest stored record (a capture
// replayed from last year still has a "last 15 minutes"); custom takes
// from/to in UTC.
export function rangePicker(onChange) {
  const p = params();
  const cur = p.get('from') || p.get('to') ? 'custom' : (p.get('last') || 'all');
  const sel = el('select', { id: 'range', name: 'last', 'aria-label': 'time range' },
    ranges.map(([v, label]) => el('option', { value: v, selected: v === cur }, label)));
  const from = el('input', { type: 'datetime-local', id: 'from', step: '1', value: toLocal(p.get('from')), 'aria-label': 'from (UTC)' });
  const to = el('input', { type: 'datetime-local', id: 'to', step: '1', value: toLocal(p.get('to')), 'aria-label': 'to (UTC)' });
  const custom = el('span', { class: 'custom', hidden: cur !== 'custom' }, from, ' – ', to, ' UTC');
  const apply = () => {
    const q = params();
    q.delete('page');
    if (sel.value === 'custom') {
      custom.hidden = false;
      q.delete('last');
      setOrDelete(q, 'from', from.value);
      setOrDelete(q, 'to', to.value);
    } else {
      custom.hidden = true;
      q.delete('from'); q.delete('to');
      if (sel.value === 'all') q.delete('last'); else q.set('last', sel.value);
    }
    setParams(q);
    onChange();
  };
  sel.addEventListener('change', apply);
  from.addEventListener('change', apply);
  to.addEventListener('change', apply);
  return el('label', { class: 'ctl' }, 'Range ', sel, custom);
}

function toLocal(v) {
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return new Date(Number(v) / 1e6).toISOString().slice(0, 19);
  return v.replace('Z', '').slice(0, 19);
}

export function setOrDelete(q, k, v) {
  if (v === '' || v === null || v === undefined) q.delete(k); else q.set(k, v);
}

export function select(name, label, options, onChange, def = '') {
  const cur = params().get(name) || def;
  const s = el('select', { id: name, name, 'aria-label': label },
    options.map(([v, text]) => el('option', { value: v, selected: v === cur }, text)));
  s.addEventListener('change', () => {
    const q = params();
    q.delete('page');
    if (s.value === def) q.delete(name); else q.set(name, s.value);
    setParams(q);
    onChange();
  });
  return el('label', { class: 'ctl' }, label + ' ', s);
}

export function classOptions(classes) {
  return [['', 'All classes'], ...classes.map((c) => [c, classLabel(c)])];
}

// Query string for API calls, from the page's URL.
export function apiQuery(keys) {
  const p = params();
  const q = new URLSearchParams();
  for (const k of keys) if (p.get(k)) q.set(k, p.get(k));
  return q;
}
