import { el, clear, getJSON, fmtDur, fmtInt, fmtTime, classLabel, showError, partialNote } from './dom.js';
import { apiQuery } from './controls.js';

// The overview's sensor panel: where several front ends' sensors write
// into one store, each sensor's records in the range and its classes'
// transaction-time percentiles, with links to search and to the what-if
// replay of that front end alone. Hidden while one sensor wrote
// everything. Sensor ids come from each sensor's configuration but are
// still set as text.

export function sensorPanel() {
  const card = el('section', { class: 'card wide', id: 'sensor-card', hidden: true, dataset: { state: 'loading' } });
  getJSON('/api/sensors?' + apiQuery(['last', 'from', 'to']))
    .then((r) => render(card, r))
    .catch((e) => { card.hidden = false; card.dataset.state = 'error'; showError(card, e); });
  return card;
}

// link keeps the page's range and adds the sensor.
function link(path, sensor) {
  const q = apiQuery(['last', 'from', 'to']);
  q.set('sensor', sensor);
  return path + '?' + q;
}

function render(card, r) {
  clear(card);
  if (r.sensors.length < 2) { card.dataset.state = 'single'; return; }
  const q = r.quantiles;
  card.append(
    el('h2', {}, 'Sensors ', el('span', { class: 'note' }, '(each front end\'s own records; percentiles of transaction time)')),
    el('table', { class: 'nums', id: 'sensors' },
      el('thead', {}, el('tr', {}, ['Sensor', 'Connections', 'Transactions', 'Pageviews', 'Last record (UTC)', 'Class']
        .map((h) => el('th', {}, h)), q.map((x) => el('th', { class: 'n' }, `p${Math.round(x * 100)}`)), el('th', {}, ''))),
      el('tbody', {}, r.sensors.flatMap((s) => {
        const classes = s.classes.length ? s.classes : [null];
        return classes.map((c, i) => el('tr', { dataset: { sensor: s.sensor, class: c ? c.class : '' } },
          i === 0 ? [
            el('td', { rowspan: classes.length }, s.sensor || '(unnamed)'),
            el('td', { class: 'n', rowspan: classes.length }, fmtInt(s.connections)),
            el('td', { class: 'n sensor-tx', rowspan: classes.length }, fmtInt(s.transactions)),
            el('td', { class: 'n', rowspan: classes.length }, fmtInt(s.pageviews)),
            el('td', { rowspan: classes.length }, s.last ? fmtTime(s.last) : '–'),
          ] : [],
          el('td', {}, c ? `${classLabel(c.class)} (${fmtInt(c.count)})` : '–'),
          q.map((_, k) => el('td', { class: 'n' }, c ? fmtDur(c.values[k]) : '–')),
          i === 0 ? el('td', { rowspan: classes.length },
            el('a', { href: link('/', s.sensor), class: 'sensor-overview' }, 'overview'), ' · ',
            el('a', { href: link('/search', s.sensor), class: 'sensor-search' }, 'search'), ' · ',
            el('a', { href: link('/whatif/', s.sensor), class: 'sensor-whatif' }, 'what-if')) : []));
      }))),
  );
  if (r.approx > 0) {
    card.append(el('p', { class: 'note sensor-approx', dataset: { approx: r.approx } },
      `Percentiles from each sensor's per-minute histograms: each within ±${(r.approx * 100).toFixed(2)}% of the exact value. Counts are exact.`));
  }
  if (r.truncated) card.append(el('p', { class: 'note' }, 'Only the most active sensors are shown.'));
  const partial = partialNote(r.missing_shards);
  if (partial) { partial.removeAttribute('id'); card.append(partial); }
  card.hidden = false;
  card.dataset.state = 'shown';
}
