import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { el, fmtDur, classColor, classLabel } from './dom.js';
import { annotationsPlugin } from './annotations.js';

// Charts keep their data in the DOM (data-series on the figure), so tests
// and curious users can check every plotted number against the store.

const plots = new Set();

function width(container) {
  return Math.max(320, Math.floor(container.getBoundingClientRect().width || 600) - 4);
}

window.addEventListener('resize', () => {
  for (const p of plots) {
    const box = p.root.parentElement;
    if (box) p.setSize({ width: width(box), height: p.height });
  }
});

export function destroy(container) {
  for (const p of [...plots]) {
    if (container.contains(p.root)) { p.destroy(); plots.delete(p); }
  }
}

// Axis and grid colours follow the page's theme (CSS variables).
function themed(axes) {
  const css = getComputedStyle(document.body);
  const fg = css.getPropertyValue('--muted').trim() || '#6b7280';
  const line = css.getPropertyValue('--line').trim() || '#e5e7eb';
  return (axes || [{}, {}]).map((a) => ({ ...a, stroke: fg, grid: { stroke: line, width: 1, ...(a.grid || {}) }, ticks: { stroke: line, width: 1, ...(a.ticks || {}) } }));
}

function make(container, opts, data) {
  destroy(container);
  // Every time chart (x in s) carries the annotation marks.
  if (opts.scales && opts.scales.x && opts.scales.x.time) opts = { ...opts, plugins: [...(opts.plugins || []), annotationsPlugin()] };
  const p = new uPlot({ width: width(container), height: 260, ...opts, axes: themed(opts.axes) }, data, container);
  plots.add(p);
  // The plot is reachable from its box, so tests can aim at a value.
  container.uplot = p;
  return p;
}

// Drill-down (issue #17): a drag selects, never zooms, and the selection
// goes to the page's handler; where a menu may open is in the box's px.
// A fresh object per plot: uPlot keeps its drag state in it.
const selectOnly = () => ({ cursor: { drag: { x: true, y: false, setScale: false } } });
const noSelect = { left: 0, top: 0, width: 0, height: 0 };

function inBox(u, left, top) {
  const o = u.over.getBoundingClientRect();
  const r = u.root.parentElement.getBoundingClientRect();
  return { left: o.left - r.left + left, top: o.top - r.top + top };
}

// bucketPicker: a click on a duration chart picks the bucket under the
// cursor, a drag the buckets it spans; onPick gets their index range.
function bucketPicker(edges, onPick) {
  const n = edges.length;
  const bucketAt = (v) => {
    let i = 0;
    while (i + 1 < n && edges[i + 1] <= v * 1e6) i++;
    return i;
  };
  let dragged = false;
  return {
    hooks: {
      init: (u) => {
        u.over.addEventListener('mousedown', () => { dragged = false; });
        u.over.addEventListener('click', (e) => {
          if (dragged) return;
          const r = u.over.getBoundingClientRect();
          const left = e.clientX - r.left;
          const i = bucketAt(u.posToVal(left, 'x'));
          onPick({ first: i, last: i, at: inBox(u, left, e.clientY - r.top) });
        });
      },
      setSelect: (u) => {
        const s = { ...u.select };
        u.setSelect(noSelect, false);
        if (s.width < 3) return;
        dragged = true;
        onPick({ first: bucketAt(u.posToVal(s.left, 'x')), last: bucketAt(u.posToVal(s.left + s.width, 'x')),
          at: inBox(u, s.left + s.width, 10) });
      },
    },
  };
}

// timePicker: a drag on a time chart (x in s) selects a time range.
function timePicker(onRange) {
  return {
    hooks: {
      setSelect: (u) => {
        const s = { ...u.select };
        u.setSelect(noSelect, false);
        if (s.width < 3) return;
        onRange({ from: u.posToVal(s.left, 'x'), to: u.posToVal(s.left + s.width, 'x'), at: inBox(u, s.left + s.width, 10) });
      },
    },
  };
}

const msAxis = {
  values: (u, vals) => vals.map((v) => (v == null ? '' : fmtDur(v * 1e6))),
  size: 72,
};

// Grid lines only at decades (1 ms, 10 ms, ...); the minor log ticks clutter.
const decadesOnly = (u, splits) => splits.map((v) => (Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9 ? v : null));
const logAxis = { values: logTicks, space: 30, grid: { filter: decadesOnly }, ticks: { filter: decadesOnly } };

function logTicks(u, vals) {
  return vals.map((v) => {
    const l = Math.log10(v);
    return Math.abs(l - Math.round(l)) < 1e-9 ? fmtDur(v * 1e6) : '';
  });
}

// Histogram: share of records per log-spaced bucket, one stepped line per
// class. x is the bucket's lower edge in ms; the last bucket is open above.
export function histogram(container, hs, classes, onPick) {
  const edges = hs.length ? hs[0].edges : [];
  // The first bucket starts at 0 (values below 1 ms): draw it one step left.
  const xs = edges.map((e, i) => (e > 0 ? e / 1e6 : (edges[i + 1] || 1e6) / 1e6 / 1.12));
  if (xs.length) xs.push(xs[xs.length - 1] * 1.12);
  const data = [xs];
  const series = [{ label: 'from', value: (u, v) => (v == null ? '' : fmtDur(v * 1e6)) }];
  for (const h of hs) {
    const ys = h.counts.map((c) => (h.total ? c / h.total : 0));
    ys.push(ys.length ? ys[ys.length - 1] : 0);
    data.push(ys);
    series.push({
      label: classLabel(h.class),
      stroke: classColor(classes, h.class),
      width: 1.8,
      fill: classColor(classes, h.class) + '22',
      paths: uPlot.paths.stepped({ align: 1 }),
      value: (u, v) => (v == null ? '' : (v * 100).toFixed(1) + '%'),
    });
  }
  container.dataset.series = JSON.stringify(hs.map((h) => ({ class: h.class, edges: h.edges, counts: h.counts, total: h.total })));
  return make(container, {
    scales: { x: { time: false, distr: 3, log: 10, range: () => [xs[0], xs[xs.length - 1]] }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.08, 0.01)] } },
    axes: [logAxis, { values: (u, v) => v.map((x) => (x * 100).toFixed(0) + '%'), size: 50 }],
    series,
    legend: { live: true },
    ...(onPick ? selectOnly() : {}),
    plugins: [markers([1000, 3000]), ...(onPick ? [bucketPicker(edges, onPick)] : [])],
  }, data);
}

// CDF from the same buckets: fraction of records below each bucket's
// upper edge.
export function cdfOf(h) {
  let cum = 0;
  const pts = [];
  for (let i = 0; i < h.counts.length; i++) {
    cum += h.counts[i];
    const upper = i + 1 < h.edges.length ? h.edges[i + 1] : null;
    if (upper !== null) pts.push([upper, h.total ? cum / h.total : 0]);
  }
  return pts;
}

export function cdf(container, hs, classes, onPick) {
  const edges = hs.length ? hs[0].edges.slice(1) : [];
  const data = [edges.map((e) => e / 1e6)];
  const series = [{ label: 'below', value: (u, v) => (v == null ? '' : fmtDur(v * 1e6)) }];
  const exposed = [];
  for (const h of hs) {
    const pts = cdfOf(h);
    data.push(pts.map((p) => p[1]));
    exposed.push({ class: h.class, upper: pts.map((p) => p[0]), fraction: pts.map((p) => p[1]) });
    series.push({ label: classLabel(h.class), stroke: classColor(classes, h.class), width: 2,
      value: (u, v) => (v == null ? '' : (v * 100).toFixed(1) + '%') });
  }
  container.dataset.series = JSON.stringify(exposed);
  return make(container, {
    scales: { x: { time: false, distr: 3, log: 10 }, y: { range: [0, 1] } },
    axes: [logAxis, { values: (u, v) => v.map((x) => (x * 100).toFixed(0) + '%'), size: 50 }],
    series,
    ...(onPick ? selectOnly() : {}),
    plugins: [markers([1000, 3000]), ...(onPick && hs.length ? [bucketPicker(hs[0].edges, onPick)] : [])],
  }, data);
}

// Dashed vertical markers at SYN-retransmission times (ms).
function markers(msList) {
  return {
    hooks: {
      draw: (u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = '#f87171';
        ctx.setLineDash([4, 4]);
        ctx.lineWidth = 1;
        for (const m of msList) {
          const x = u.valToPos(m, 'x', true);
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
        }
        ctx.restore();
      },
    },
  };
}

const qDash = [[2, 3], [], [8, 4]];
const qWidth = [1.2, 2.2, 1.2];

// Percentiles over time: one line per class and quantile (p50 dotted, p90
// solid, p99 dashed). Buckets a class has no records in are gaps.
export function series(container, points, quantiles, step, classes, shownClasses, onRange) {
  const ts = [...new Set(points.map((p) => p.t))].sort((a, b) => a - b);
  const idx = new Map(ts.map((t, i) => [t, i]));
  const data = [ts.map((t) => (t + step / 2) / 1e9)];
  const s = [{}];
  const exposed = [];
  for (const c of shownClasses) {
    const mine = points.filter((p) => p.class === c);
    exposed.push({ class: c, t: mine.map((p) => p.t), count: mine.map((p) => p.count), values: mine.map((p) => p.values) });
    quantiles.forEach((q, qi) => {
      const ys = new Array(ts.length).fill(null);
      for (const p of mine) ys[idx.get(p.t)] = p.values[qi] / 1e6;
      data.push(ys);
      s.push({ label: `${classLabel(c)} p${Math.round(q * 100)}`, stroke: classColor(classes, c), width: qWidth[qi] || 1,
        dash: qDash[qi] || [], spanGaps: false, points: { show: ts.length < 40 },
        value: (u, v) => (v == null ? '' : fmtDur(v * 1e6)) });
    });
  }
  container.dataset.series = JSON.stringify(exposed);
  return make(container, {
    scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.08, 1)] } },
    axes: [{}, msAxis],
    series: s,
    ...(onRange ? selectOnly() : {}),
    plugins: onRange ? [timePicker(onRange)] : [],
  }, data);
}

// Live scatter: recent points per class (x: packet time in s, y: ms).
export function liveScatter(container, byClass, classes, onRange) {
  const all = [];
  for (const [c, pts] of byClass) for (const p of pts) all.push([p.t / 1e9, c, p.total / 1e6]);
  all.sort((a, b) => a[0] - b[0]);
  const names = [...byClass.keys()];
  const data = [all.map((a) => a[0])];
  const s = [{}];
  for (const c of names) {
    data.push(all.map((a) => (a[1] === c ? a[2] : null)));
    s.push({ label: classLabel(c), stroke: classColor(classes, c), width: 0,
      points: { show: true, size: 5, fill: classColor(classes, c) }, paths: () => null,
      value: (u, v) => (v == null ? '' : fmtDur(v * 1e6)) });
  }
  container.dataset.points = String(all.length);
  return make(container, {
    height: 220,
    scales: { x: { time: true }, y: { distr: 3, log: 10 } },
    axes: [{}, { values: logTicks, size: 72, grid: { filter: decadesOnly } }],
    series: s,
    ...(onRange ? selectOnly() : {}),
    plugins: onRange ? [timePicker(onRange)] : [],
  }, data);
}

export function legendNote(text) {
  return el('p', { class: 'note' }, text);
}
