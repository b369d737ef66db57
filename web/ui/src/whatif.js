import uPlot from 'uplot';
import './whatif.css';
import { el, clear, getJSON, fmtDur, fmtInt, fmtTime, params, showError, classLabel } from './dom.js';
import { ranges } from './controls.js';

// The what-if page is a plain GET form like search: the rules, range,
// class and priorities travel in the URL, so a what-if view is a link.
// Everything shown is built with text nodes (rule text and class names
// come from the user and the network).

const formKeys = ['rules', 'last', 'from', 'to', 'sensor', 'class', 'priority', 'model', 'theme'];
const defaultRules = 'IF IP.SRC == * THEN FAST SYN GAP 200ms';

export async function whatif(main, meta) {
  const p = params();
  const v = (k) => p.get(k) || '';
  const rulesText = p.has('rules') ? p.get('rules') : defaultRules;
  const picker = el('select', { id: 'candidate', 'aria-label': 'standard candidates' },
    el('option', { value: '' }, 'Standard candidates…'));
  const rules = el('textarea', { name: 'rules', id: 'rules', rows: 5, spellcheck: 'false', autocomplete: 'off',
    'aria-label': 'rules, one per line' });
  rules.value = rulesText;
  picker.addEventListener('change', () => {
    if (picker.value) { rules.value = picker.value; rules.focus(); }
  });
  const form = el('form', { method: 'get', action: '/whatif/', id: 'whatif-form', class: 'controls whatif-form' },
    el('div', { class: 'rules-box' },
      el('label', { class: 'ctl', for: 'rules' }, 'Rules ', el('span', { class: 'note' }, 'IF cond THEN action[, action], one per line; # comments')),
      rules),
    el('div', { class: 'whatif-ctls' },
      el('label', { class: 'ctl' }, 'Pick ', picker),
      el('label', { class: 'ctl' }, 'Range ', el('select', { name: 'last', id: 'last' },
        ranges.filter(([k]) => k !== 'custom').map(([k, t]) => el('option', { value: k, selected: (v('last') || 'all') === k }, t)))),
      el('label', { class: 'ctl' }, 'From ', el('input', { name: 'from', id: 'from', value: v('from'), placeholder: 'YYYY-MM-DDTHH:MM:SS', size: 19 })),
      el('label', { class: 'ctl' }, 'To ', el('input', { name: 'to', id: 'to', value: v('to'), placeholder: 'UTC', size: 19 })),
      // A splicer acts on its own front end's traffic: replay one sensor's.
      el('label', { class: 'ctl', title: 'replay one front end\'s records (its sensor id); empty: every sensor' }, 'Sensor ',
        el('input', { name: 'sensor', id: 'sensor', value: v('sensor'), size: 10, maxlength: 128 })),
      el('label', { class: 'ctl' }, 'Ranked class ', el('select', { name: 'class', id: 'class' },
        [['', 'Auto (first high-priority)'], ...meta.classes.map((c) => [c, classLabel(c)])]
          .map(([k, t]) => el('option', { value: k, selected: v('class') === k }, t)))),
      el('label', { class: 'ctl' }, 'Priorities ', el('input', { name: 'priority', id: 'priority', value: v('priority'),
        placeholder: 'premium=high,others=low', size: 24 })),
      el('label', { class: 'ctl', title: 'linear: server time scales with concurrency, SYN losses stay as measured; '
        + 'queue: a worker pool and backlog fitted on the capture, so queueing and SYN drops follow the load' }, 'Server model ',
      el('select', { name: 'model', id: 'model' },
        [['linear', 'Linear load'], ['queue', 'Fitted queue']].map(([k, t]) => el('option', { value: k, selected: (v('model') || 'linear') === k }, t)))),
      v('theme') ? el('input', { type: 'hidden', name: 'theme', value: v('theme') }) : null,
      el('button', { type: 'submit', id: 'evaluate' }, 'Evaluate')));
  // Empty fields stay out of the URL, except the rules: empty rules mean
  // "no rules" (predicted = measured), not "the default".
  form.addEventListener('formdata', (e) => {
    for (const k of [...e.formData.keys()]) {
      if (k === 'rules') continue;
      if (!e.formData.get(k) || (k === 'last' && e.formData.get(k) === 'all') || (k === 'model' && e.formData.get(k) === 'linear')) e.formData.delete(k);
    }
  });
  const status = el('p', { class: 'loading', id: 'whatif-status' }, 'Reading the records and replaying them under the rules… (the first evaluation of a range reads the store; later edits reuse the records)');
  const result = el('div', { id: 'whatif-result' });
  clear(main).append(form, status, result);

  const q = new URLSearchParams();
  for (const k of formKeys) if (k !== 'theme' && p.has(k)) q.set(k, p.get(k));
  if (q.get('last') === 'all') q.delete('last');
  let res;
  try {
    res = await getJSON('/whatif/api?' + q);
  } catch (e) {
    status.remove();
    showError(result, e);
    return;
  }
  status.remove();
  for (const c of res.candidates) picker.append(el('option', { value: c.rules }, c.label));
  render(result, res, rules);
}

function render(box, res, textarea) {
  if (res.parse_error) {
    const pe = res.parse_error;
    const line = pe.line > 0 ? (res.rules_text.split('\n')[pe.line - 1] || '') : '';
    const where = pe.line > 0 ? `Line ${pe.line}, column ${pe.col}: ` : '';
    box.append(el('div', { class: 'error parse-error', id: 'parse-error', role: 'alert',
      dataset: { line: pe.line, col: pe.col } },
    el('p', {}, 'The rules do not parse. ', el('b', {}, where), pe.message),
    line ? el('pre', { class: 'parse-line' }, line.replace(/\r$/, ''), '\n', ' '.repeat(Math.max(0, pe.col - 1)) + '^') : null));
    // Put the cursor where the error is.
    if (pe.line > 0) {
      const lines = res.rules_text.split('\n');
      let off = 0;
      for (let i = 0; i < pe.line - 1 && i < lines.length; i++) off += lines[i].length + 1;
      off += Math.max(0, pe.col - 1);
      try { textarea.setSelectionRange(off, off); } catch { /* not focusable yet */ }
    }
    box.dataset.state = 'parse-error';
    return;
  }
  box.dataset.state = 'evaluated';
  if (res.notes.length) {
    box.append(el('ul', { class: 'notes', id: 'whatif-notes' }, res.notes.map((n) => el('li', {}, n))));
  }
  const l = res.loaded;
  const m = res.load_model;
  box.append(el('p', { class: 'range-note', id: 'whatif-summary' },
    `${fmtInt(res.units)} units replayed (${res.unit}) · ${fmtInt(l.transactions)} transactions, ${fmtInt(l.pageviews)} pageviews, `
    + `${fmtInt(l.connections)} connections read · ${res.range.From ? fmtTime(res.range.From) : 'start'} – ${res.range.To ? fmtTime(res.range.To) : 'end'} UTC`
    + (res.queue ? '' : ` · load model: server time ${fmtDur(m.intercept_ns)} + ${fmtDur(m.slope_ns)} × concurrency (${fmtInt(m.samples)} samples)`)
    + ` · ${res.passes} replay pass${res.passes === 1 ? '' : 'es'}${res.members > 1 ? ` (${res.members} replays pooled)` : ''}`
    + (res.window_ns ? ` · RT conditions over ${fmtDur(res.window_ns)}, each unit seen ${fmtDur(res.report_delay_ns)} after it ended (as rtmon live reports it)` : '')));
  if (res.queue) box.append(queueFit(res.queue));
  box.append(el('section', { class: 'card wide', id: 'whatif-rules' }, el('h2', {}, 'Rules evaluated'),
    res.rules.length ? el('ol', { class: 'rules-list' }, res.rules.map((r) => el('li', {}, el('code', {}, r))))
      : el('p', { class: 'note' }, 'No rules: the prediction is the measurement.')));

  const grid = el('div', { class: 'whatif-classes' });
  box.append(grid);
  const charts = [];
  res.classes.forEach((c, i) => {
    const chart = el('div', { class: 'chart', id: 'whatif-chart-' + i, dataset: {
      class: c.class,
      series: JSON.stringify({ class: c.class, edges: c.measured.edges_ns, measured: c.measured.counts, predicted: c.predicted.counts,
        n: c.measured.n }),
    } });
    charts.push([chart, c]);
    grid.append(el('section', { class: 'card whatif-class' + (c.class === res.class ? ' ranked' : ''), dataset: { class: c.class } },
      el('h2', {}, classLabel(c.class), ' ', el('span', { class: 'note' }, `${c.priority} priority · ${unitCount(c)}`)),
      chart,
      statsTable(c, res.members)));
  });
  if (!res.classes.length) grid.append(el('p', { class: 'empty' }, 'No records in this range.'));

  box.append(ranking(res));
  box.append(el('section', { class: 'card wide', id: 'whatif-assumptions' },
    el('h2', {}, 'Assumptions of the models ', el('span', { class: 'note' }, '(what each prediction takes for granted)')),
    el('dl', { class: 'assumptions' }, res.assumptions.map((a) => [el('dt', {}, a.action), el('dd', { dataset: { action: a.action } }, a.text)])),
    el('p', { class: 'note', id: 'whatif-syn-schedules' }, 'SYN retransmissions (DROP SYN): ',
      (res.syn_schedules || []).map((s) => `${classLabel(s.class)}: ${fmtDur(s.schedule.initial_ns)} then ×${s.schedule.growth} per attempt `
        + `(${s.schedule.source}${s.own_clients ? `; ${fmtInt(s.own_clients)} of ${fmtInt(s.clients)} clients on their own` : ''})`).join(' · ')),
    el('p', { class: 'note' }, 'Conditions (RT, RT_HIGH, RT_LOW, RT[class]) are judged in time order against the median of the '
      + 'predicted response times completed in the last 30 s, as an appliance applying the rules would measure them; an empty window '
      + 'never triggers an action. The units are the pageviews and every transaction that belongs to none (API calls, load generators).')));

  // Charts size themselves to their box, so draw after layout.
  requestAnimationFrame(() => {
    for (const [chart, c] of charts) overlay(chart, c);
    box.dataset.rendered = '1';
  });
}

function improvement(meas, pred) {
  const d = meas - pred;
  if (d === 0) return '±0';
  const pct = meas ? ` (${(100 * Math.abs(d) / meas).toFixed(0)}%)` : '';
  return (d > 0 ? '−' : '+') + fmtDur(Math.abs(d)) + pct;
}

// bandSource says what a band is the error of (whatif.BandSource): rules
// that take SYNs out of the capture's hands rest on the model running free.
function bandSource(free) {
  return free ? "the null replay's error with every SYN judged by the model, as these rules have it" : "the null replay's error";
}

function statsTable(c, members) {
  const rows = [['p50', 'p50_ns'], ['p75', 'p75_ns'], ['p90', 'p90_ns'], ['p99', 'p99_ns'], ['mean', 'mean_ns']];
  return el('table', { class: 'nums whatif-stats' },
    el('thead', {}, el('tr', {}, el('th', {}, ''), el('th', { class: 'n' }, 'Measured'), el('th', { class: 'n' }, 'Predicted'),
      el('th', { class: 'n' }, 'Change'))),
    el('tbody', {},
      rows.map(([name, k]) => {
        const a = c.measured[k];
        const b = c.predicted[k];
        return el('tr', { dataset: { stat: name, measured: a, predicted: b } },
          el('td', {}, name), el('td', { class: 'n' }, fmtDur(a)), el('td', { class: 'n' }, fmtDur(b)),
          el('td', { class: 'n ' + (b < a ? 'better' : b > a ? 'worse' : '') }, improvement(a, b)));
      }),
      c.band ? el('tr', { class: 'band', dataset: { band50: c.band[0], band90: c.band[1], free: c.band_free ? '1' : '' } },
        el('td', { colspan: 4 }, `model band ±${(100 * c.band[0]).toFixed(1)}% (p50), ±${(100 * c.band[1]).toFixed(1)}% (p90): ${bandSource(c.band_free)}`)) : null,
      c.members_p90_ns ? el('tr', { class: 'members', dataset: { lo: c.members_p90_ns[0], hi: c.members_p90_ns[1], members } },
        el('td', { colspan: 4 }, `pooled over ${fmtInt(members)} replays (the front end's copies make one replay one draw); `
          + `one alone put the p90 at ${fmtDur(c.members_p90_ns[0])} to ${fmtDur(c.members_p90_ns[1])}`)) : null,
      el('tr', { class: 'counts', dataset: { affected: c.affected, dropped: c.dropped, failed: c.failed } },
        el('td', { colspan: 4 }, `affected ${fmtInt(c.affected)} · SYN dropped ${fmtInt(c.dropped)} · failed ${fmtInt(c.failed)}`))));
}

function ranking(res) {
  const link = (rules) => {
    const q = params();
    q.set('rules', rules.join('\n'));
    return '/whatif/?' + q;
  };
  // The ranked rule set as a rules file for the front end: the page's own
  // parameters, so the server ranks exactly what is shown here.
  const download = (i, rules) => {
    const q = new URLSearchParams();
    for (const k of formKeys) if (k !== 'theme' && params().has(k)) q.set(k, params().get(k));
    if (q.get('last') === 'all') q.delete('last');
    q.set('rank', String(i + 1));
    q.set('expect', rules.join('\n'));
    return '/whatif/rules.txt?' + q;
  };
  return el('section', { class: 'card wide', id: 'whatif-ranking' },
    el('h2', {}, `Ranking for ${classLabel(res.class)} `,
      el('span', { class: 'note' }, '(single rules and pairs; gain = measured − predicted mean and p90; cost = the largest rise of another class’s mean)')),
    el('table', { class: 'nums', id: 'ranking' },
      el('thead', {}, el('tr', {}, el('th', { class: 'n' }, '#'), el('th', {}, 'Rules'), el('th', { class: 'n' }, 'Gain (mean)'),
        el('th', { class: 'n' }, 'Gain (p90)'), el('th', { class: 'n' }, 'Cost to others'), el('th', { class: 'n' }, 'Failed'),
        el('th', {}, 'Rules file'))),
      el('tbody', {}, res.ranking.length ? res.ranking.map((r, i) => el('tr', { dataset: { gain: r.gain_ns, cost: r.cost_ns, rules: r.rules.join('\n') } },
        el('td', { class: 'n' }, String(i + 1)),
        el('td', { class: 'rk-rules' }, el('a', { href: link(r.rules), title: 'evaluate these rules' }, r.rules.map((x, j) => [j ? el('br') : null, x]))),
        el('td', { class: 'n ' + (r.gain_ns > 0 ? 'better' : r.gain_ns < 0 ? 'worse' : '') }, signed(r.gain_ns)),
        el('td', { class: 'n' }, signed(r.gain_p90_ns), r.band ? el('span', { class: 'note band', title: `${bandSource(r.band_free)}, at p90` },
          ` ±${(100 * r.band[1]).toFixed(1)}%`) : null),
        el('td', { class: 'n' + (r.cost_ns > 0 ? ' worse' : '') }, r.cost_ns > 0 ? `${fmtDur(r.cost_ns)} (${classLabel(r.cost_class)})` : 'none'),
        el('td', { class: 'n' }, fmtInt(r.failed)),
        el('td', {}, el('a', { href: download(i, r.rules), download: '', class: 'rk-download', title: 'these rules with their predicted effect, model and assumptions as comments' }, 'Download rules'))))
        : el('tr', {}, el('td', { colspan: 7 }, 'nothing to rank')))));
}

function signed(ns) {
  if (!ns) return '0';
  return (ns > 0 ? '+' : '−') + fmtDur(Math.abs(ns));
}

// unitCount names a class's units by kind: "12 pageviews + 3 stand-alone
// transactions".
function unitCount(c) {
  const parts = [];
  if (c.pageviews) parts.push(`${fmtInt(c.pageviews)} pageview${c.pageviews === 1 ? '' : 's'}`);
  if (c.transactions) parts.push(`${fmtInt(c.transactions)} stand-alone transaction${c.transactions === 1 ? '' : 's'}`);
  return parts.join(' + ') || 'no units';
}

// Overlay: share of the class's units per bucket (the overview's log
// buckets), measured and predicted as two stepped series on a log time
// axis. The counts themselves are in the box's data-series.
function overlay(box, c) {
  const edges = c.measured.edges_ns;
  const xs = edges.map((e, i) => (e > 0 ? e / 1e6 : (edges[i + 1] || 1e6) / 1e6 / 1.12));
  if (!xs.length) return;
  xs.push(xs[xs.length - 1] * 1.12);
  // Trim the empty buckets at both ends so the shape is readable.
  let lo = 0;
  let hi = xs.length - 1;
  const any = (i) => c.measured.counts[i] || c.predicted.counts[i];
  while (lo < edges.length - 1 && !any(lo)) lo++;
  while (hi > lo + 1 && !any(hi - 1)) hi--;
  lo = Math.max(0, lo - 2);
  hi = Math.min(xs.length - 1, hi + 2);
  const share = (d) => {
    const ys = d.counts.map((n) => (d.n ? n / d.n : 0));
    ys.push(ys[ys.length - 1]);
    return ys.slice(lo, hi + 1);
  };
  const css = getComputedStyle(document.body);
  const fg = css.getPropertyValue('--muted').trim() || '#6b7280';
  const line = css.getPropertyValue('--line').trim() || '#e5e7eb';
  const decades = (u, splits) => splits.map((v) => (Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9 ? v : null));
  const pct = (u, v) => (v == null ? '' : (v * 100).toFixed(1) + '%');
  const width = Math.max(320, Math.floor(box.getBoundingClientRect().width || 600) - 4);
  const x = xs.slice(lo, hi + 1);
  // Whole decades at both ends, so the axis always has labelled ticks.
  const xMin = 10 ** Math.floor(Math.log10(x[0]) + 1e-9);
  const xMax = 10 ** Math.ceil(Math.log10(x[x.length - 1]) - 1e-9);
  const plot = new uPlot({
    width,
    height: 240,
    scales: { x: { time: false, distr: 3, log: 10, range: () => [xMin, xMax] }, y: { range: (u, a, b) => [0, Math.max(b * 1.08, 0.01)] } },
    axes: [
      { stroke: fg, grid: { stroke: line, width: 1, filter: decades }, ticks: { stroke: line, width: 1, filter: decades }, space: 30,
        values: (u, vals) => vals.map((v) => (Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9 ? fmtDur(v * 1e6) : '')) },
      { stroke: fg, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 }, size: 50, values: (u, vs) => vs.map((v) => (v * 100).toFixed(0) + '%') },
    ],
    series: [
      { label: 'from', value: (u, v) => (v == null ? '' : fmtDur(v * 1e6)) },
      { label: 'measured', stroke: '#6b7280', width: 1.6, fill: '#6b728033', paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: pct },
      { label: 'predicted', stroke: '#2563eb', width: 2, fill: '#2563eb22', paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: pct },
    ],
    legend: { live: true },
  }, [x, share(c.measured), share(c.predicted)], box);
  window.addEventListener('resize', () => {
    plot.setSize({ width: Math.max(320, Math.floor(box.getBoundingClientRect().width || 600) - 4), height: 240 });
  });
}

// queueFit shows the fitted queueing server and how well replaying the
// unmodified capture reproduces it, per class.
function queueFit(q) {
  const counted = q.half_open_slots ? 'half-open and waiting connections' : 'connections waiting for a worker';
  const backlog = q.backlog ? `backlog ${fmtInt(q.backlog)} of ${counted}` : 'no SYN drops modelled';
  return el('section', { class: 'card wide', id: 'whatif-queue', dataset: { workers: q.workers, backlog: q.backlog } },
    el('h2', {}, 'Server model: fitted queue ',
      el('span', { class: 'note' }, `${fmtInt(q.workers)} workers ${q.holds_transfer ? "busy until the response's last byte" : "free at the response's first byte"} `
        + `(${(100 * q.unexplained).toFixed(1)}% of responses unexplained; service times per URL vary by ${(100 * (q.service_spread || 0)).toFixed(1)}%), ${backlog}; `
        + `SYN losses measured ${fmtInt(q.syn_losses_measured)}, replayed ${fmtInt(q.syn_losses_replayed)}; `
        + `${fmtInt(q.half_open || 0)} connections left half-open; null replay within ${(100 * q.worst).toFixed(1)}% `
        + `(${(100 * (q.free_worst || 0)).toFixed(1)}% with every SYN judged by the model)`)),
    el('table', { class: 'nums' },
      el('thead', {}, el('tr', {}, ['Class', 'Server p50', 'Server p90', 'Unit p50', 'Unit p90', 'SYN losses'].map((h, i) => el('th', { class: i ? 'n' : '' }, h)))),
      el('tbody', {}, (q.fit || []).map((f) => el('tr', { dataset: { class: f.class, freeBand50: f.free_band[0], freeBand90: f.free_band[1] } },
        el('td', {}, classLabel(f.class)),
        [f.server_p50_ns, f.server_p90_ns].map((x) => el('td', { class: 'n' }, `${fmtDur(x[0])} / ${fmtDur(x[1])}`)),
        [[f.unit_p50_ns, f.free_unit_p50_ns], [f.unit_p90_ns, f.free_unit_p90_ns]].map(([x, free]) => el('td', { class: 'n' },
          `${fmtDur(x[0])} / ${fmtDur(x[1])} / ${fmtDur(free)}`)),
        el('td', { class: 'n' }, `${fmtInt(f.syn_losses[0])} / ${fmtInt(f.syn_losses[1])}`))))),
    el('p', { class: 'note' }, 'measured / replayed without rules; unit times add a third figure, replayed with every SYN judged by the model '
      + '(as FAST SYN and SPLICE have it). ',
      ...(q.notes || []).map((n) => el('span', { class: 'q-note' }, n + ' '))));
}
