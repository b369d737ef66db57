import './compare.css';
import { el, clear, getJSON, fmtDur, fmtInt, params, showError, classLabel, partialNote } from './dom.js';
import * as charts from './charts.js';

// The compare page: side A against side B per class, the figures, their
// differences with bootstrap intervals, the rank test's p-value and a
// verdict. The sides live in the URL (a_from, a_to, b_from, b_to, class,
// or at and window), and each new comparison is a history entry, so a
// view is a link and Back returns to the previous one. Text goes in as
// text nodes only: class names come from the network.

const keys = ['a_from', 'a_to', 'b_from', 'b_to', 'at', 'window', 'class', 'a_class', 'b_class', 'a_sensor', 'b_sensor', 'theme'];

// ns since the epoch to a datetime-local value in UTC, to the second.
function toInput(ns) {
  if (!ns) return '';
  return new Date(Math.floor(ns / 1e6)).toISOString().slice(0, 19);
}

function apiURL() {
  const p = params();
  const q = new URLSearchParams();
  for (const k of keys) if (k !== 'theme' && p.get(k)) q.set(k, p.get(k));
  return '/api/compare?' + q.toString();
}

function verdictClass(v) {
  if (v.startsWith('slower')) return 'verdict verdict-slower';
  if (v.startsWith('faster')) return 'verdict verdict-faster';
  if (v.startsWith('too few')) return 'verdict verdict-few';
  return 'verdict verdict-same';
}

const pct = (x) => (x >= 0 ? '+' : '') + (100 * x).toFixed(0) + '%';
const ci = (i) => '[' + fmtDur(i.lo) + ', ' + fmtDur(i.hi) + ']';

// A side without records has no figures: a dash, not "0 ms".
const dur = (r, side, k) => (r[side].n ? fmtDur(r[side][k]) : '–');
const both = (r) => r.a.n > 0 && r.b.n > 0;

function classTable(cr) {
  const head = ['', 'n A', 'n B', 'median A', 'median B', 'Δ median', 'CI', 'p90 A', 'p90 B', 'Δ p90', 'CI', 'p99 A', 'p99 B', 'p', 'verdict'];
  return el('table', { class: 'compare', dataset: { class: cr.class } },
    el('thead', null, el('tr', null, head.map((h, i) => el('th', { class: i > 0 && i < 14 ? 'n' : undefined }, h)))),
    el('tbody', null, cr.rows.map((r) => el('tr', { dataset: { kind: r.kind, component: r.component, verdict: r.verdict } },
      el('td', null, r.kind + ' ' + r.component),
      el('td', { class: 'n' }, fmtInt(r.a.n)), el('td', { class: 'n' }, fmtInt(r.b.n)),
      el('td', { class: 'n' }, dur(r, 'a', 'median')), el('td', { class: 'n' }, dur(r, 'b', 'median')),
      el('td', { class: 'n' }, both(r) ? fmtDur(r.delta_median) + ' (' + pct(r.rel_median) + ')' : '–'), el('td', { class: 'n' }, r.verdict.startsWith('too few') ? '–' : ci(r.median_ci)),
      el('td', { class: 'n' }, dur(r, 'a', 'p90')), el('td', { class: 'n' }, dur(r, 'b', 'p90')),
      el('td', { class: 'n' }, both(r) ? fmtDur(r.delta_p90) + ' (' + pct(r.rel_p90) + ')' : '–'), el('td', { class: 'n' }, r.verdict.startsWith('too few') ? '–' : ci(r.p90_ci)),
      el('td', { class: 'n' }, dur(r, 'a', 'p99')), el('td', { class: 'n' }, dur(r, 'b', 'p99')),
      el('td', { class: 'n' }, r.p_value.toPrecision(3)),
      el('td', { class: verdictClass(r.verdict) }, r.verdict)))));
}

// The two sides' distributions of the transactions' total, overlaid as
// the overview overlays classes: shares per log-spaced bin.
function overlay(box, row) {
  const h = row.hist;
  if (!h) return;
  const lower = h.edges.slice(0, -1);
  charts.histogram(box, [
    { class: 'A', edges: lower, counts: h.a, total: 1 },
    { class: 'B', edges: lower, counts: h.b, total: 1 },
  ], ['A', 'B']);
}

function results(box, rep) {
  clear(box);
  box.appendChild(el('p', { class: 'compare-note', id: 'compare-note' },
    `Mann-Whitney U at alpha ${rep.alpha}; ${Math.round(rep.confidence * 100)}% bootstrap intervals of B − A from ${rep.resamples} resamples; ` +
    `at most ${fmtInt(rep.max_per_class)} records per class and side. The verdict is the transactions' total's.`));
  const partial = partialNote(rep.missing_shards);
  if (partial) box.appendChild(partial);
  if (!rep.classes.length) {
    box.appendChild(el('p', { class: 'empty', id: 'compare-empty' }, 'No records in either range.'));
    return;
  }
  for (const cr of rep.classes) {
    const chart = el('div', { class: 'chart compare-chart', dataset: { class: cr.class } });
    box.appendChild(el('section', { class: 'card compare-class', dataset: { class: cr.class, verdict: cr.verdict } },
      el('h2', null, classLabel(cr.class) + ': ', el('span', { class: verdictClass(cr.verdict) }, cr.verdict),
        el('small', null, ` (transactions: A ${fmtInt(cr.count_a)}, B ${fmtInt(cr.count_b)})`)),
      classTable(cr), chart));
    overlay(chart, cr.rows.find((r) => r.kind === 'transactions' && r.component === 'total'));
  }
}

function input(id, label) {
  return el('input', { type: 'datetime-local', id, step: '1', 'aria-label': label });
}

export async function compare(main, meta) {
  const f = {
    a_from: input('a-from', 'A from (UTC)'), a_to: input('a-to', 'A to (UTC)'),
    b_from: input('b-from', 'B from (UTC)'), b_to: input('b-to', 'B to (UTC)'),
  };
  const cls = el('select', { id: 'compare-class', 'aria-label': 'class' },
    el('option', { value: '' }, 'All classes'), meta.classes.map((c) => el('option', { value: c }, classLabel(c))));
  const go = el('button', { type: 'submit', id: 'compare-go' }, 'Compare');
  const form = el('form', { class: 'card compare-form', id: 'compare-form' },
    el('fieldset', null, el('legend', null, 'A'), f.a_from, ' – ', f.a_to),
    el('fieldset', null, el('legend', null, 'B'), f.b_from, ' – ', f.b_to),
    el('label', { class: 'ctl' }, 'Class ', cls), go, el('span', { class: 'compare-note' }, 'UTC'));
  const box = el('div', { id: 'compare-result' });
  main.append(el('h1', null, 'Compare'), form, box);

  let seq = 0;
  const load = async () => {
    const mine = ++seq;
    cls.value = params().get('class') || '';
    box.dataset.loading = '1';
    try {
      const rep = await getJSON(apiURL());
      if (mine !== seq) return;
      // The inputs show the sides compared, also when the URL gave none.
      f.a_from.value = toInput(rep.a.range.From); f.a_to.value = toInput(rep.a.range.To);
      f.b_from.value = toInput(rep.b.range.From); f.b_to.value = toInput(rep.b.range.To);
      results(box, rep);
    } catch (e) {
      if (mine !== seq) return;
      clear(box);
      showError(box, e);
    }
    delete box.dataset.loading;
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    const theme = params().get('theme');
    for (const [k, inp] of Object.entries(f)) if (inp.value) q.set(k, inp.value);
    if (cls.value) q.set('class', cls.value);
    if (theme) q.set('theme', theme);
    // A history entry per comparison: Back returns to the previous one.
    history.pushState(null, '', location.pathname + '?' + q.toString());
    load();
  });
  window.addEventListener('popstate', load);
  await load();
}
