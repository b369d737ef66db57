import { el, clear, getJSON, fmtDur, fmtInt, fmtTime, params, showError, classLabel, partialNote } from './dom.js';
import { ranges, classOptions } from './controls.js';

const filterKeys = ['kind', 'id', 'client', 'class', 'sensor', 'url', 'status', 'comp', 'min', 'max', 'last', 'from', 'to'];

// Search is a plain GET form: submitting it puts the filters in the URL,
// so every result page can be shared and reloaded.
export async function search(main, meta) {
  const p = params();
  const v = (k) => p.get(k) || '';
  const kind = v('kind') || 'transactions';
  const comps = (k) => (meta.components && meta.components[k]) || ['total'];
  const compSel = el('select', { name: 'comp', id: 'comp', 'aria-label': 'component' },
    comps(kind).map((c) => el('option', { value: c, selected: (v('comp') || 'total') === c }, c)));
  const form = el('form', { method: 'get', action: '/search', id: 'search-form', class: 'controls' },
    el('label', { class: 'ctl' }, 'Records ', el('select', { name: 'kind', id: 'kind' },
      [['transactions', 'Transactions'], ['pageviews', 'Pageviews']].map(([k, t]) => el('option', { value: k, selected: v('kind') === k }, t)))),
    el('label', { class: 'ctl' }, 'Client ', el('input', { name: 'client', id: 'client', value: v('client'), placeholder: '10.4.*.* or 10.0.0.0/8', size: 16 })),
    el('label', { class: 'ctl' }, 'Class ', el('select', { name: 'class', id: 'class' },
      classOptions(meta.classes).map(([k, t]) => el('option', { value: k, selected: v('class') === k }, t)))),
    // One front end's records, where several sensors write into one store.
    el('label', { class: 'ctl' }, 'Sensor ', el('input', { name: 'sensor', id: 'sensor', value: v('sensor'), size: 10, maxlength: 128 })),
    el('label', { class: 'ctl' }, 'URL contains ', el('input', { name: 'url', id: 'url', value: v('url'), size: 18 })),
    el('label', { class: 'ctl' }, 'Status ', el('input', { name: 'status', id: 'status', value: v('status'), size: 4, inputmode: 'numeric' })),
    // A duration range of one component: what a histogram bucket or a
    // table cell of the overview leads to (min inclusive, max exclusive).
    el('label', { class: 'ctl' }, 'Duration ', compSel, ' from ', el('input', { name: 'min', id: 'min', value: v('min'), size: 6, inputmode: 'decimal', 'aria-label': 'minimum ms' }),
      ' to ', el('input', { name: 'max', id: 'max', value: v('max'), size: 6, inputmode: 'decimal', 'aria-label': 'maximum ms (exclusive)' }), ' ms'),
    v('id') ? el('label', { class: 'ctl' }, 'Id ', el('input', { name: 'id', id: 'id', value: v('id'), size: 18 })) : null,
    el('label', { class: 'ctl' }, 'Range ', el('select', { name: 'last', id: 'last' },
      ranges.filter(([k]) => k !== 'custom').map(([k, t]) => el('option', { value: k, selected: (v('last') || 'all') === k }, t)))),
    el('label', { class: 'ctl' }, 'From ', el('input', { name: 'from', id: 'from', value: v('from'), placeholder: 'YYYY-MM-DDTHH:MM:SS', size: 19 })),
    el('label', { class: 'ctl' }, 'To ', el('input', { name: 'to', id: 'to', value: v('to'), placeholder: 'UTC', size: 19 })),
    v('theme') ? el('input', { type: 'hidden', name: 'theme', value: v('theme') }) : null,
    el('button', { type: 'submit', id: 'search-go' }, 'Search'));
  // Empty fields stay out of the URL.
  form.addEventListener('formdata', (e) => {
    for (const k of [...e.formData.keys()]) {
      const x = e.formData.get(k);
      if (!x || (k === 'last' && x === 'all') || (k === 'comp' && x === 'total')) e.formData.delete(k);
    }
  });
  // The components depend on the kind of record.
  form.querySelector('#kind').addEventListener('change', (e) => {
    const cur = compSel.value;
    clear(compSel).append(...comps(e.target.value).map((c) => el('option', { value: c, selected: c === cur }, c)));
  });
  const results = el('div', { id: 'results' });
  clear(main).append(form, results);

  const q = new URLSearchParams();
  for (const k of [...filterKeys, 'page', 'limit', 'theme']) if (p.get(k)) q.set(k, p.get(k));
  if (q.get('last') === 'all') q.delete('last');
  let res;
  try {
    res = await getJSON('/api/search?' + q);
  } catch (e) {
    showError(results, e);
    return;
  }
  const exportQ = new URLSearchParams(q); exportQ.delete('page'); exportQ.delete('limit'); exportQ.delete('theme');
  const page = Math.floor(res.offset / res.limit) + 1;
  const pages = Math.max(1, Math.ceil(res.total / res.limit));
  const pageLink = (n, text, id) => {
    const pq = new URLSearchParams(q); pq.set('page', String(n));
    return el('a', { href: '/search?' + pq, id, class: 'pager' }, text);
  };
  const partial = partialNote(res.missing_shards);
  if (partial) results.append(partial);
  results.append(el('p', { class: 'summary', id: 'result-summary', dataset: { total: res.total, page, pages } },
    `${fmtInt(res.total)} ${res.kind} · page ${page} of ${pages} `,
    page > 1 ? pageLink(page - 1, '‹ newer', 'prev') : null, ' ',
    page < pages ? pageLink(page + 1, 'older ›', 'next') : null,
    el('span', { class: 'exports' }, 'Export: ',
      el('a', { href: '/export/search.csv?' + exportQ, id: 'export-csv' }, 'CSV'), ' · ',
      el('a', { href: '/export/search.json?' + exportQ, id: 'export-json' }, 'JSON'))));

  // The filtered component gets a column when the table has none for it.
  const extra = ['total', 'tconn', 'tserver', 'ttransfer'].includes(v('comp') || 'total') ? null : v('comp');
  if (res.kind === 'pageviews') results.append(pvTable(res.pageviews, extra));
  else results.append(txTable(res.transactions, res.links || [], extra));
}

// compCell is the value of component comp (JSON field comp_ns; rtt is
// rtt_client_ns), or nothing when no column was asked for.
function compCell(r, comp) {
  if (!comp) return null;
  const ns = r[(comp === 'rtt' ? 'rtt_client' : comp) + '_ns'];
  return el('td', { class: 'n', dataset: { comp, ns } }, fmtDur(ns));
}

function txTable(txs, links, extra) {
  return el('table', { id: 'result-table', class: 'nums results' },
    el('thead', {}, el('tr', {}, ['Start (UTC)', 'Client', 'Server', 'Request', 'Status', 'Total', 'Tconn', 'Tserver', 'Ttransfer', extra, 'Flags', '']
      .filter((h) => h !== null).map((h) => el('th', {}, h)))),
    el('tbody', {}, txs.map((t, i) => {
      return el('tr', { dataset: { id: t.id, total: t.total_ns } },
        el('td', {}, fmtTime(t.start)), el('td', {}, t.client), el('td', {}, `${t.server}:${t.server_port}`),
        el('td', { class: 'req' }, el('span', { class: 'method' }, t.method || '?'), ' ', el('span', { class: 'host' }, t.host || ''), el('span', { class: 'url' }, t.url || '')),
        el('td', { class: 'n' + (t.status >= 500 ? ' bad' : '') }, t.status ? String(t.status) : '–'),
        el('td', { class: 'n', dataset: { ns: t.total_ns } }, fmtDur(t.total_ns)),
        el('td', { class: 'n' }, fmtDur(t.tconn_ns)), el('td', { class: 'n' }, fmtDur(t.tserver_ns)), el('td', { class: 'n' }, fmtDur(t.ttransfer_ns)),
        compCell(t, extra),
        el('td', { class: 'flags' }, (t.flags || []).join(' ')),
        el('td', {}, el('a', { href: links[i] || '#', class: 'pv-link' }, 'pageview')));
    })));
}

function pvTable(pvs, extra) {
  return el('table', { id: 'result-table', class: 'nums results' },
    el('thead', {}, el('tr', {}, ['Start (UTC)', 'Client', 'Class', 'Page', 'Status', 'Total', 'Tconn', 'Tserver', 'Ttransfer', extra, 'Objects', 'SYN losses', '']
      .filter((h) => h !== null).map((h) => el('th', {}, h)))),
    el('tbody', {}, pvs.map((p) => el('tr', { dataset: { id: p.id, total: p.total_ns } },
      el('td', {}, fmtTime(p.start)), el('td', {}, p.client), el('td', {}, classLabel(p.class)),
      el('td', { class: 'req' }, el('span', { class: 'host' }, p.host || ''), el('span', { class: 'url' }, p.url || '')),
      el('td', { class: 'n' }, p.status ? String(p.status) : '–'),
      el('td', { class: 'n', dataset: { ns: p.total_ns } }, fmtDur(p.total_ns)),
      el('td', { class: 'n' }, fmtDur(p.tconn_ns)), el('td', { class: 'n' }, fmtDur(p.tserver_ns)), el('td', { class: 'n' }, fmtDur(p.ttransfer_ns)),
      compCell(p, extra),
      el('td', { class: 'n' }, String(p.objects)), el('td', { class: 'n' }, String(p.syn_losses + p.synack_losses)),
      el('td', {}, el('a', { href: '/pageview/' + encodeURIComponent(p.id), class: 'pv-link' }, 'waterfall'))))));
}
