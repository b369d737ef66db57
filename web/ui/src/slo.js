import { el, clear, getJSON, fmtInt, fmtTime, classLabel, showError, partialNote } from './dom.js';
import { apiQuery } from './controls.js';

// The overview's objectives panel: per class objective (the classes file's
// slo), its attainment over its window and the error budget's burn rate
// over 1 h, 6 h and 3 d, counted by the server from the store's rollups.
// Class names come from the operator's file but are still set as text.

// sloPanel returns the card at once and fills it when /api/slo answers;
// it stays hidden when the classes file sets no objective.
export function sloPanel() {
  const card = el('section', { class: 'card wide', id: 'slo-card', hidden: true, dataset: { state: 'loading' } });
  getJSON('/api/slo?' + apiQuery(['last', 'from', 'to']))
    .then((r) => render(card, r))
    .catch((e) => { card.hidden = false; card.dataset.state = 'error'; showError(card, e); });
  return card;
}

const pct = (x) => (x === null || x === undefined ? '–' : (100 * x).toFixed(2) + '%');
const burn = (x) => (x === null || x === undefined ? '–' : (x >= 10 ? x.toFixed(1) : x.toFixed(2)) + '×');

function render(card, r) {
  clear(card);
  if (!r.slos.length) { card.dataset.state = 'none'; return; }
  const windows = r.slos[0].burn.map((w) => w.label);
  card.append(
    el('h2', {}, 'Objectives ', el('span', { class: 'note', id: 'slo-asof' },
      `(as of ${r.as_of ? fmtTime(r.as_of) + ' UTC' : 'no records'}; burn rate = error ratio ÷ error budget: 1× spends the budget exactly over the objective's window)`)),
    el('table', { class: 'nums', id: 'slo' },
      el('thead', {}, el('tr', {}, el('th', {}, 'Class'), el('th', {}, 'Objective'), el('th', { class: 'n' }, 'Attainment'),
        el('th', { class: 'n' }, 'Budget left'), windows.map((w) => el('th', { class: 'n' }, `Burn ${w}`)))),
      el('tbody', {}, r.slos.map((s) => {
        const a = s.attainment;
        return el('tr', { dataset: { class: s.class, id: s.id, target: s.target } },
          el('td', {}, classLabel(s.class)),
          el('td', {}, s.text),
          el('td', { class: 'n slo-att' + (a.attained !== null && a.attained < s.target ? ' worse' : ''),
            dataset: { attained: a.attained === null ? '' : a.attained, good: a.good, total: a.total, window: a.label },
            title: `${fmtInt(a.good)} of ${fmtInt(a.total)} under the threshold over ${a.label}` }, pct(a.attained)),
          el('td', { class: 'n slo-budget' + (a.budget_left !== null && a.budget_left < 0 ? ' worse' : '') }, pct(a.budget_left ?? null)),
          s.burn.map((w) => el('td', { class: 'n slo-burn' + (w.burn_rate !== null && w.burn_rate > 1 ? ' worse' : ''),
            dataset: { window: w.label, burn: w.burn_rate === null ? '' : w.burn_rate, good: w.good, total: w.total },
            title: `${fmtInt(w.good)} of ${fmtInt(w.total)} under the threshold over ${w.label}` }, burn(w.burn_rate))));
      }))),
  );
  if (r.truncated) card.append(el('p', { class: 'note' }, 'Only the first objectives are shown.'));
  const partial = partialNote(r.missing_shards);
  if (partial) { partial.removeAttribute('id'); card.append(partial); }
  card.hidden = false;
  card.dataset.state = 'shown';
}
