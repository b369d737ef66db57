import { el, clear, getJSON, fmtDur, fmtInt, fmtBytes, fmtTime, classColor, classLabel, params, setParams, showError, partialNote } from './dom.js';
import { rangePicker, select, classOptions, apiQuery } from './controls.js';
import * as charts from './charts.js';
import { onLive, renderPipeline } from './live.js';
import { sloPanel } from './slo.js';
import { sensorPanel } from './sensors.js';
import * as drill from './drill.js';
import { track, commit, onPop, setControl } from './urlstate.js';

const keys = ['last', 'from', 'to', 'class', 'kind', 'component', 'sensor'];

// liveDefault: on a live server the wall screen wants the recent past, not
// all data. It reads the page's data-live (no round trip), so that the
// first overview request can start before /api/meta answers.
function liveDefault() {
  const p0 = params();
  if (document.body.dataset.live === 'true' && !p0.get('last') && !p0.get('from') && !p0.get('to')) {
    p0.set('last', '15m');
    setParams(p0);
  }
}

// prefetchOverview starts the first overview request while main() still
// waits for /api/meta: over millions of records the overview is the slow
// one, and the two do not depend on each other.
export function prefetchOverview() {
  liveDefault();
  const p = getJSON('/api/overview?' + apiQuery(keys));
  p.catch(() => {}); // reported when awaited
  return p;
}

export async function overview(main, meta, prefetched) {
  clear(main);
  const controls = el('div', { class: 'controls', id: 'controls' });
  const body = el('div', { id: 'overview' });
  main.append(controls, body);
  let loading = null;
  let again = false;

  const load = async () => {
    if (loading) { again = true; return loading; }
    loading = (async () => {
      try {
        const pending = prefetched || getJSON('/api/overview?' + apiQuery(keys));
        prefetched = null;
        const o = normalize(await pending);
        render(body, o, meta);
        setReportLinks();
        main.dataset.loaded = String(Date.now());
      } catch (e) {
        clear(body);
        showError(body, e);
      }
    })();
    await loading;
    loading = null;
    if (again) { again = false; await load(); }
  };

  liveDefault();
  track();
  const kind = params().get('kind') || 'transactions';
  // Each change is a history entry: back restores the previous view.
  const changed = () => { commit(); load(); };
  controls.append(
    rangePicker(changed),
    select('class', 'Class', classOptions(meta.classes), changed),
    select('kind', 'Records', [['transactions', 'Transactions'], ['pageviews', 'Pageviews']], () => {
      const q = params(); q.delete('component'); history.replaceState(null, '', '?' + q); commit(); location.reload();
    }, 'transactions'),
    select('component', 'Component', meta.components[kind].map((c) => [c, c]), changed, 'total'),
    select('refresh', 'Refresh', [['0', 'off'], ['10', '10 s'], ['30', '30 s'], ['60', '1 min'], ['300', '5 min']], () => { commit(); schedule(); }, '30'),
    el('span', { class: 'exports' }, 'Report: ',
      el('a', { id: 'report-html', href: '/export/report.html' }, 'HTML'), ' · ',
      el('a', { id: 'report-pdf', href: '/export/report.pdf' }, 'PDF')),
  );

  // A wall screen over a store that others keep filling re-reads it.
  let timer = null;
  const schedule = () => {
    clearInterval(timer);
    const secs = Number(params().get('refresh') || '30');
    if (secs > 0) timer = setInterval(() => { if (!document.hidden) load(); }, secs * 1000);
  };
  schedule();
  onPop(() => {
    if ((params().get('kind') || 'transactions') !== kind) { location.reload(); return; }
    syncControls();
    schedule();
    load();
  });

  if (meta.live) {
    const panel = el('section', { class: 'card wide', id: 'live' },
      el('h2', {}, 'Live ', el('span', { class: 'note', id: 'live-status' }, 'waiting for the first event…')),
      el('div', { class: 'live-classes', id: 'live-classes' }),
      el('div', { class: 'chart', id: 'live-chart' }));
    main.insertBefore(panel, body);
    const recent = new Map(); // class -> points of the last 2 minutes (packet time)
    recent.prev = null; // previous event, for rates
    let lastRefresh = 0;
    onLive((ev) => {
      renderLive(panel, ev, recent, meta);
      // The store batches writes for up to 2 s; re-query it at most every 5 s.
      if (Date.now() - lastRefresh > 5000) { lastRefresh = Date.now(); load(); }
    });
  }
  await load();
}

const localTime = (v) => (!v ? '' : /^\d+$/.test(v) ? new Date(Number(v) / 1e6).toISOString().slice(0, 19) : v.replace('Z', '').slice(0, 19));

// syncControls shows the URL's state in the controls (after back or
// forward), as rangePicker and select read it when they are built.
function syncControls() {
  const p = params();
  const custom = !!(p.get('from') || p.get('to'));
  setControl('range', custom ? 'custom' : (p.get('last') || 'all'));
  const span = document.querySelector('#controls .custom');
  if (span) span.hidden = !custom;
  setControl('from', localTime(p.get('from')));
  setControl('to', localTime(p.get('to')));
  setControl('class', p.get('class') || '');
  setControl('component', p.get('component') || 'total');
  setControl('refresh', p.get('refresh') || '30');
}

// Report links carry the current selection.
function setReportLinks() {
  for (const id of ['report-html', 'report-pdf']) {
    const a = document.getElementById(id);
    if (a) a.setAttribute('href', a.getAttribute('href').split('?')[0] + '?' + apiQuery(keys));
  }
}

// The store's result types have Go field names; give them the page's.
function normalize(o) {
  o.histograms = o.histograms.map((h) => ({ class: h.Class, edges: h.Edges, counts: h.Counts, total: h.Total }));
  o.percentiles = o.percentiles.map((p) => ({ class: p.Class, count: p.Count, values: p.Values }));
  o.series = o.series.map((p) => ({ class: p.Class, t: p.T, count: p.Count, values: p.Values }));
  return o;
}

function card(id, title, ...content) {
  return el('section', { class: 'card', id }, el('h2', {}, title), ...content);
}

let renderGen = 0;

function render(body, o, meta) {
  clear(body);
  // Until this render's charts are drawn, the page is not rendered: a
  // reader (or a test) waiting for data-rendered sees only whole views.
  const gen = ++renderGen;
  delete body.dataset.rendered;
  const classes = meta.classes.length ? meta.classes : o.classes;
  const shown = o.percentiles.map((p) => p.class);
  const q = o.quantiles;
  body.dataset.span = JSON.stringify(o.span);

  const rangeNote = el('p', { class: 'range-note', id: 'range-note' },
    `${fmtTime(o.span[0])} – ${fmtTime(o.span[1])} UTC · ${o.kind} · ${o.component}`
    + (o.class ? ` · class ${classLabel(o.class)}` : ' · all classes'));
  if (o.sensor) {
    // One front end's view (from the sensor panel): said, and undone in a click.
    const all = params();
    all.delete('sensor');
    rangeNote.append(' · sensor ', el('b', { id: 'overview-sensor' }, o.sensor), ' (',
      el('a', { href: '?' + all, id: 'overview-all-sensors' }, 'all sensors'), ')');
  }
  body.append(rangeNote);
  const partial = partialNote(o.missing_shards);
  if (partial) body.append(partial);

  body.append(counters(o));
  body.append(sloPanel());
  body.append(sensorPanel());

  const pctTable = el('table', { id: 'percentiles', class: 'nums' },
    el('thead', {}, el('tr', {}, el('th', {}, 'Class'), el('th', { class: 'n' }, 'Count'),
      q.map((x) => el('th', { class: 'n' }, `p${Math.round(x * 100)}`)))),
    el('tbody', {}, o.percentiles.map((p) => el('tr', { dataset: { class: p.class, count: p.count } },
      el('td', {}, swatch(classes, p.class), classLink(p.class, classLabel(p.class))),
      el('td', { class: 'n' }, classLink(p.class, fmtInt(p.count))),
      p.values.map((v, i) => el('td', { class: 'n', dataset: { q: q[i], ns: v } },
        compLink(p.class, o.component, v, fmtDur(v), `p${Math.round(q[i] * 100)} and slower`)))))));
  if (!o.percentiles.length) pctTable.append(el('caption', {}, 'No records in this range.'));
  const pctCard = card('pct-card', `Response time (${o.component})`, pctTable);
  if (o.approx > 0) {
    // Over millions of records the percentiles come from per-minute
    // histograms; say so, with the bound, rather than print false digits.
    pctCard.append(el('p', { class: 'note', id: 'approx-note', dataset: { approx: o.approx } },
      `Percentiles from per-minute histograms: each within ±${(o.approx * 100).toFixed(2)}% of the exact value. Counts are exact.`));
  }
  body.append(pctCard);

  const histBox = el('div', { class: 'chart', id: 'hist-chart' });
  const cdfBox = el('div', { class: 'chart', id: 'cdf-chart' });
  const seriesBox = el('div', { class: 'chart', id: 'series-chart', dataset: { step: o.series_step } });
  body.append(
    card('hist-card', 'Distribution', histBox,
      el('p', { class: 'note' }, 'Share of records per log-spaced bucket (20 per decade). Red lines: 1 s and 3 s, where clients that lost a SYN or SYN/ACK retry.')),
    card('cdf-card', 'Cumulative distribution', cdfBox),
    el('section', { class: 'card wide', id: 'series-card' },
      el('h2', {}, 'p50 / p90 / p99 over time ', el('span', { class: 'note' }, `(${fmtDur(o.series_step)} buckets; dotted p50, solid p90, dashed p99)`)),
      seriesBox),
  );
  body.append(breakdown(o, classes));
  body.append(el('div', { class: 'tops' }, top(o, 'url', 'Slowest URLs'), top(o, 'server', 'Slowest servers'), top(o, 'client', 'Slowest clients')));

  // Charts size themselves to their box, so draw after layout.
  requestAnimationFrame(() => {
    if (gen !== renderGen) return; // a later render replaced these boxes
    if (o.histograms.length) {
      charts.histogram(histBox, o.histograms, classes, pickBuckets(o, histBox));
      charts.cdf(cdfBox, o.histograms, classes, pickBuckets(o, cdfBox));
    } else {
      histBox.dataset.series = '[]'; cdfBox.dataset.series = '[]';
      histBox.append(el('p', { class: 'empty' }, 'No records.'));
      cdfBox.append(el('p', { class: 'empty' }, 'No records.'));
    }
    if (o.series.length) {
      charts.series(seriesBox, o.series, q, o.series_step, classes, shown, pickTime(seriesBox, shown));
    } else {
      seriesBox.dataset.series = '[]';
      seriesBox.append(el('p', { class: 'empty' }, 'No records.'));
    }
    body.dataset.rendered = '1';
  });
}

// Drill-down: a bucket (click) or buckets (drag) of the distribution
// lead to the records in them; the histogram's own counts label the menu.
function pickBuckets(o, box) {
  return ({ first, last, at }) => {
    const edges = o.histograms[0].edges;
    const sum = (h) => h.counts.slice(first, last + 1).reduce((a, b) => a + b, 0);
    const count = (c) => o.histograms.filter((h) => c === null || h.class === c).reduce((n, h) => n + sum(h), 0);
    drill.drillTo(box, at, `${o.component} ${drill.bucketLabel(edges, first, last)}`,
      drill.classItems(o.histograms.map((h) => h.class), drill.bucketFilter(edges, first, last, o.component), count));
  };
}

// A dragged time range leads to the records that started in it.
function pickTime(box, shown) {
  return ({ from, to, at }) => drill.drillTo(box, at, `${fmtTime(from * 1e9)} – ${fmtTime(to * 1e9)} UTC`,
    drill.classItems(shown, drill.timeFilter(from, to)));
}

function classLink(c, text) {
  return el('a', { href: drill.searchHref({ class: c }), class: 'drill', title: `${classLabel(c)}: its records in search` }, text);
}

// compLink: the records of class c whose component is at least ns.
function compLink(c, comp, ns, text, what) {
  return el('a', { href: drill.searchHref({ class: c, comp, min: ns > 0 ? drill.ms(ns) : null }), class: 'drill',
    title: `${classLabel(c)}: ${what} (${comp} ≥ ${fmtDur(ns)}) in search` }, text);
}

function swatch(classes, c) {
  const s = el('i', { class: 'swatch' });
  s.style.background = classColor(classes, c);
  return s;
}

function counter(name, label, value, opts = {}) {
  const shown = opts.text !== undefined ? opts.text : fmtInt(value);
  return el('div', { class: 'counter' + (opts.warn ? ' warn' : '') + (opts.na ? ' na' : '') + (shown.length > 8 ? ' long' : ''), dataset: { counter: name, value: opts.na ? '' : value }, title: opts.title },
    el('span', { class: 'v' }, shown), el('span', { class: 'l' }, label));
}

function counters(o) {
  const k = o.counters;
  const p = o.pipeline;
  const na = { na: true, text: 'n/a', title: 'Known only while capturing live (rtmon live)' };
  return el('section', { class: 'counters', id: 'counters' },
    counter('pageviews', 'Pageviews', k.Pageviews),
    counter('transactions', 'Transactions', k.Transactions),
    counter('connections', 'Connections', k.Connections),
    counter('syn_losses', 'SYN losses', k.SYNLosses, { warn: k.SYNLosses > 0, title: `${fmtDur(k.SYNLossGap)} lost by clients` }),
    counter('synack_losses', 'SYN/ACK losses', k.SYNACKLosses, { warn: k.SYNACKLosses > 0, title: `${fmtDur(k.SYNACKLossGap)} lost by clients` }),
    counter('retrans_conns', 'Conns with retransmissions', k.ConnsWithRetrans, { title: fmtBytes(k.ConnRetransBytes) + ' retransmitted' }),
    counter('retrans_bytes', 'Retransmitted bytes', k.ConnRetransBytes, { text: fmtBytes(k.ConnRetransBytes) }),
    counter('server_errors', 'Server errors (5xx)', k.ServerErrors, { warn: k.ServerErrors > 0 }),
    counter('incomplete', 'Incomplete transactions', k.IncompleteTx),
    p ? counter('capture_drops', 'Capture drops', p.capture_drops, { warn: p.capture_drops > 0 }) : counter('capture_drops', 'Capture drops', 0, na),
    p ? counter('evictions', 'Evictions', p.evictions, { warn: p.evictions > 0 }) : counter('evictions', 'Evictions', 0, na),
    counter('store_backlog', 'Store back-log' + (o.store_state ? ` (${o.store_state})` : ''), o.store.Queued,
      { warn: o.store.Queued > 0 || !!o.store_state, title: o.store.LastError || 'records waiting to be stored' }),
  );
}

function breakdown(o, classes) {
  const comps = o.kind === 'pageviews' ? ['tconn', 'tserver', 'ttransfer', 'tother'] : ['tconn', 'ttls', 'trequest', 'tserver', 'ttransfer'];
  const mean = (b, c) => (b.mean || {})[c] || 0;
  const maxSum = Math.max(1, ...o.breakdown.map((b) => comps.reduce((s, c) => s + mean(b, c), 0)));
  const rows = o.breakdown.map((b) => {
    const bar = el('div', { class: 'stack' });
    for (const c of comps) {
      const seg = el('span', { class: 'seg seg-' + c, title: `${c} mean: ${fmtDur(mean(b, c))}` });
      seg.style.width = (100 * mean(b, c) / maxSum).toFixed(3) + '%';
      bar.append(seg);
    }
    return el('tr', { dataset: { class: b.class, count: b.count } },
      el('td', {}, [swatch(classes, b.class), classLink(b.class, classLabel(b.class))]),
      comps.map((c) => el('td', { class: 'n', dataset: { comp: c, ns: mean(b, c) } }, compLink(b.class, c, mean(b, c), fmtDur(mean(b, c)), 'above the mean'))),
      el('td', { class: 'n', dataset: { comp: 'total', ns: mean(b, 'total') } }, compLink(b.class, 'total', mean(b, 'total'), fmtDur(mean(b, 'total')), 'above the mean')),
      el('td', { class: 'bar' }, bar));
  });
  return el('section', { class: 'card wide', id: 'breakdown-card' },
    el('h2', {}, 'Where the time goes ', el('span', { class: 'note' }, '(mean per ' + (o.kind === 'pageviews' ? 'pageview' : 'transaction') + '; the components add up to the total. Pick a component above for its percentiles.)')),
    el('table', { id: 'breakdown', class: 'nums' },
      el('thead', {}, el('tr', {}, el('th', {}, 'Class'), comps.map((c) => el('th', { class: 'n' }, c)), el('th', { class: 'n' }, 'total'),
        el('th', {}, el('span', { class: 'legend' }, comps.map((c) => el('span', {}, el('i', { class: 'seg seg-' + c }), c)))))),
      el('tbody', {}, rows)));
}

function top(o, by, title) {
  const rows = o.top[by] || [];
  const link = (key) => {
    const q = new URLSearchParams();
    for (const k of ['last', 'from', 'to', 'class', 'kind', 'theme']) { const v = params().get(k); if (v) q.set(k, v); }
    if (by === 'client') q.set('client', key);
    else if (by === 'url') {
      // Keys are host+url; search matches the URL part.
      const i = key.indexOf('/');
      q.set('url', i >= 0 ? key.slice(i) : key);
    } else return null;
    return '/search?' + q;
  };
  return el('section', { class: 'card', id: 'top-' + by },
    el('h2', {}, title),
    el('table', { class: 'nums top' },
      el('thead', {}, el('tr', {}, el('th', {}, by === 'url' ? 'Host + URL' : by), el('th', { class: 'n' }, 'Count'), el('th', { class: 'n' }, 'Mean'), el('th', { class: 'n' }, 'Max'))),
      el('tbody', {}, rows.length ? rows.map((r) => {
        const href = link(r.Key);
        return el('tr', { dataset: { key: r.Key, count: r.Count, mean: r.Mean, max: r.Max } },
          el('td', { class: 'key' }, href ? el('a', { href }, r.Key) : r.Key),
          el('td', { class: 'n' }, fmtInt(r.Count)), el('td', { class: 'n' }, fmtDur(r.Mean)), el('td', { class: 'n' }, fmtDur(r.Max)));
      }) : el('tr', {}, el('td', { colspan: 4 }, 'none')))));
}

function renderLive(panel, ev, recent, meta) {
  const status = panel.querySelector('#live-status');
  status.textContent = ev.time ? `newest packet ${fmtTime(ev.time)} UTC` : 'no traffic yet';
  const cutoff = ev.time - 120e9;
  for (const c of ev.classes || []) {
    const list = recent.get(c.class) || [];
    for (const p of c.points || []) list.push(p);
    recent.set(c.class, list.filter((p) => p.t >= cutoff).slice(-5000));
  }
  const box = panel.querySelector('#live-classes');
  clear(box);
  const classes = meta.classes.slice();
  for (const c of ev.classes || []) if (!classes.includes(c.class)) classes.push(c.class);
  // Rates from the cumulative counters, over packet time between events.
  const prev = recent.prev;
  const dt = prev && ev.time > prev.time ? (ev.time - prev.time) / 1e9 : 0;
  for (const c of ev.classes || []) {
    const before = prev && (prev.classes || []).find((x) => x.class === c.class);
    const rate = dt && before ? ((c.transactions - before.transactions) / dt).toFixed(1) + ' tx/s · ' : '';
    box.append(el('div', { class: 'live-class', dataset: { class: c.class, transactions: c.transactions, pageviews: c.pageviews } },
      swatch(classes, c.class), el('b', {}, classLabel(c.class)),
      ` ${rate}${fmtInt(c.transactions)} transactions · ${fmtInt(c.pageviews)} pageviews · ${fmtInt(c.syn_losses)} SYN / ${fmtInt(c.synack_losses)} SYN-ACK losses`));
  }
  recent.prev = ev;
  panel.dataset.events = String(Number(panel.dataset.events || 0) + 1);
  const chartBox = panel.querySelector('#live-chart');
  const any = [...recent.values()].some((l) => l.length);
  if (any) {
    charts.liveScatter(chartBox, recent, classes, ({ from, to, at }) => drill.drillTo(chartBox, at,
      `${fmtTime(from * 1e9)} – ${fmtTime(to * 1e9)} UTC`, drill.classItems([...recent.keys()], drill.timeFilter(from, to))));
  }
}
