import { el, clear, getJSON, fmtTime } from './dom.js';
import './annotations.css';

// Annotations (deploys, config changes, capture drops) are marks on every
// time chart: a vertical line at the annotation's time with its text as a
// label. Their texts were typed by users or an API client: they go into
// the DOM as text only (el builds text nodes), never as HTML.

// One listing serves the charts drawn for the same range (the live chart
// is redrawn every second): ranges are widened to whole 10 s, and an answer
// is reused for 10 s.
const quantum = 10e9;
const maxAge = 10000;
let cached = { key: '', at: 0, list: null };

// loadAnnotations lists the annotations of [fromNs, toNs).
export async function loadAnnotations(fromNs, toNs) {
  const from = Math.floor(fromNs / quantum) * quantum;
  const to = Math.ceil(toNs / quantum) * quantum + quantum;
  const key = `${from}-${to}`;
  if (cached.key === key && Date.now() - cached.at < maxAge) return cached.list;
  const r = await getJSON(`/api/annotations?from=${from}&to=${to}`);
  cached = { key, at: Date.now(), list: r.annotations || [] };
  return cached.list;
}

function label(a) {
  const tags = (a.tags || []).length ? ` [${a.tags.join(', ')}]` : '';
  const cls = a.class ? ` (class ${a.class})` : '';
  return `${fmtTime(a.time_ms * 1e6)} UTC${cls}: ${a.text}${tags}`;
}

// annotationsPlugin is a uPlot plugin for a chart whose x scale is time in
// seconds: it loads the annotations of the x range when the chart is ready
// or rescaled, and keeps one marker element per annotation over the plot.
export function annotationsPlugin() {
  let list = [];
  let layer = null;
  const place = (u) => {
    if (!layer) return;
    const w = u.over.clientWidth || u.bbox.width;
    for (const m of layer.children) {
      const x = u.valToPos(Number(m.dataset.timeMs) / 1000, 'x');
      m.hidden = !(x >= 0 && x <= w);
      m.style.left = `${x}px`;
    }
  };
  const render = (u) => {
    clear(layer);
    for (const a of list) {
      layer.append(el('div', { class: 'ann-marker', title: label(a), dataset: { id: a.id, timeMs: a.time_ms, source: a.source } },
        el('span', { class: 'ann-label' }, a.text)));
    }
    u.root.dataset.annotations = String(list.length);
    place(u);
  };
  const load = (u) => {
    const { min, max } = u.scales.x;
    if (!layer || min == null || max == null) return;
    loadAnnotations(min * 1e9, max * 1e9).then((l) => {
      if (!layer) return; // destroyed meanwhile
      list = l;
      render(u);
    }).catch(() => {}); // no marks is no reason to break the chart
  };
  return {
    hooks: {
      ready: [(u) => {
        layer = el('div', { class: 'ann-layer' });
        u.over.appendChild(layer);
        load(u);
      }],
      setScale: [(u, key) => { if (key === 'x') { place(u); load(u); } }],
      setSize: [place],
      destroy: [() => { layer = null; }],
    },
  };
}
