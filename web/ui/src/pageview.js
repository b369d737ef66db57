import { el, clear, getJSON, fmtDur, fmtInt, fmtBytes, fmtTime, showError, classLabel } from './dom.js';

// The pageview page: a DevTools-like waterfall with connections as rows.
// On each row, each transaction shows its client-perceived phases: time
// lost to SYN/SYN-ACK loss, connect, request, wait (Tserver) and transfer.
export async function pageview(main) {
  const id = decodeURIComponent(location.pathname.replace(/^\/pageview\//, ''));
  let d;
  try {
    d = await getJSON('/api/pageview/' + encodeURIComponent(id));
  } catch (e) {
    showError(main, e);
    return;
  }
  const pv = d.Pageview;
  const txs = d.Transactions;
  const conns = d.Connections;
  document.title = `Pageview ${pv.host || ''}${pv.url || ''} · rtmon`;

  main.append(el('section', { class: 'card wide', id: 'pv-summary', dataset: { id: pv.id, total: pv.total_ns } },
    el('h1', { class: 'pv-title' }, el('span', { class: 'host' }, pv.host || ''), el('span', { class: 'url' }, pv.url || '')),
    el('div', { class: 'pv-facts' },
      fact('Total', fmtDur(pv.total_ns), 'total'), fact('Tconn', fmtDur(pv.tconn_ns), 'tconn'), fact('Tserver', fmtDur(pv.tserver_ns), 'tserver'),
      fact('Ttransfer', fmtDur(pv.ttransfer_ns), 'ttransfer'), fact('Tother', fmtDur(pv.tother_ns), 'tother'),
      fact('Start', fmtTime(pv.start) + ' UTC', 'start'), fact('Client', pv.client, 'client'), fact('Class', classLabel(pv.class), 'class'),
      fact('Status', String(pv.status || '–'), 'status'), fact('Objects', String(pv.objects), 'objects'),
      fact('After load', String(pv.after_load || 0), 'after-load'), fact('Redirects', String(pv.redirects || 0), 'redirects'),
      fact('Grouped by', evidenceLabel(pv.evidence), 'evidence'),
      // Which sensors saw it: more than one when stitched across front ends.
      (pv.sensors && pv.sensors.length) ? fact(pv.sensors.length > 1 ? 'Sensors' : 'Sensor', pv.sensors.join(', '), 'sensors') : null,
      fact('Connections', String(pv.connections), 'connections'), fact('SYN / SYN-ACK losses', `${pv.syn_losses} / ${pv.synack_losses}`, 'losses'),
      fact('Bytes', fmtBytes(pv.bytes), 'bytes'), fact('User-Agent', pv.user_agent || '–', 'ua')),
    (pv.flags && pv.flags.length) ? el('p', { class: 'flags' }, 'Flags: ', pv.flags.join(', ')) : null,
    el('p', { class: 'exports' }, el('a', { href: '/export/har/' + encodeURIComponent(pv.id) + '.har', id: 'export-har' }, 'Download HAR'))));

  main.append(waterfall(pv, txs, conns, d.offsets, d.pv_offsets));
  main.append(txList(pv, txs, conns, d.offsets, d.pv_offsets, d.search || {}));
  // A click on a bar opens that transaction's headers. The open one is in
  // the URL (#tx-...): a shared link opens it, back closes it again.
  let opened = null;
  const openTarget = () => {
    const id = decodeURIComponent(location.hash.slice(1));
    const det = id && document.getElementById(id);
    if (opened && opened !== det) opened.open = false;
    opened = null;
    if (det && det.tagName === 'DETAILS') {
      det.open = true;
      opened = det;
    }
  };
  window.addEventListener('hashchange', openTarget);
  openTarget();
}

// What a pageview's grouping rests on, in words.
function evidenceLabel(e) {
  switch (e) {
    case 'html': return 'the page\'s HTML';
    case 'referer': return 'Referer headers';
    case 'timing': return 'timing only';
  }
  return '–';
}

function fact(label, value, key) {
  return el('div', { class: 'fact', dataset: { fact: key } }, el('span', { class: 'l' }, label), el('span', { class: 'v' }, value));
}

// Phases are laid out from the transaction's start offset (exact small
// integers; absolute ns are not exact in JavaScript).
function phases(tx, conn, start) {
  const out = [];
  let t = start;
  const add = (kind, dur) => {
    if (dur > 0) out.push({ kind, from: t, to: t + dur });
    t += dur;
  };
  if (tx.tconn_ns > 0) {
    const lost = conn && tx.index === 0 ? Math.min(tx.tconn_ns, (conn.syn_loss_gap_ns || 0) + (conn.synack_loss_gap_ns || 0)) : 0;
    add('synloss', lost);
    add('connect', tx.tconn_ns - lost);
  }
  add('tls', tx.ttls_ns || 0);
  add('request', tx.trequest_ns);
  add('wait', tx.tserver_ns);
  add('transfer', tx.ttransfer_ns);
  return out;
}

function niceStep(span) {
  const target = span / 8;
  const p = Math.pow(10, Math.floor(Math.log10(target)));
  for (const m of [1, 2, 5, 10]) if (m * p >= target) return m * p;
  return 10 * p;
}

function waterfall(pv, txs, conns, offsets, pvOff) {
  const byConn = new Map();
  for (const c of conns) byConn.set(c.id, c);
  const t0 = 0;
  let t1 = pvOff[1];
  for (const t of txs) t1 = Math.max(t1, offsets[t.id][1]);
  const span = Math.max(1, t1 - t0);
  const pct = (t) => (100 * (t - t0) / span).toFixed(4) + '%';

  // Rows: connections in order of their first transaction.
  const rows = new Map();
  for (const t of txs) {
    if (!rows.has(t.connection_id)) rows.set(t.connection_id, []);
    rows.get(t.connection_id).push(t);
  }
  const wf = el('div', { class: 'waterfall', id: 'waterfall', dataset: { t1, rows: rows.size } });
  const axis = el('div', { class: 'wf-axis' });
  const step = niceStep(span);
  for (let x = 0; x <= span; x += step) {
    const tick = el('span', { class: 'tick' }, fmtDur(x));
    tick.style.left = (100 * x / span).toFixed(4) + '%';
    axis.append(tick);
  }
  const pvMark = el('div', { class: 'wf-pv', title: `pageview ${fmtDur(pv.total_ns)}` });
  pvMark.style.left = pct(pvOff[0]);
  pvMark.style.width = (100 * (pvOff[1] - pvOff[0]) / span).toFixed(4) + '%';
  wf.append(el('div', { class: 'wf-row wf-head' }, el('div', { class: 'wf-label' }, 'Connection'), el('div', { class: 'wf-track' }, axis, pvMark)));

  let n = 0;
  for (const [cid, list] of rows) {
    const c = byConn.get(cid);
    n++;
    const label = el('div', { class: 'wf-label', title: cid },
      el('b', {}, `#${n} `), c ? `${c.server}:${c.server_port} ← :${c.client_port}` : '(connection not stored)',
      c && (c.syn_losses || c.synack_losses) ? el('span', { class: 'loss' }, ` ${c.syn_losses + c.synack_losses} lost SYN`) : null);
    const track = el('div', { class: 'wf-track' });
    for (const t of list) {
      const [start, end] = offsets[t.id];
      const ph = phases(t, c, start);
      const after = (t.flags || []).includes('after_load');
      const grp = el('a', { class: 'wf-tx' + (after ? ' after-load' : ''), href: '#tx-' + t.id,
        dataset: { tx: t.id, start, total: t.total_ns, afterLoad: after ? '1' : '0' },
        title: `${t.method || ''} ${t.host || ''}${t.url || ''} — ${t.status || '?'} — ${fmtDur(t.total_ns)}${after ? ' — after the load event' : ''} — click: its headers and its link to search` });
      grp.style.left = pct(start);
      grp.style.width = (100 * Math.max(end - start, 0) / span).toFixed(4) + '%';
      for (const p of ph) {
        const seg = el('span', { class: 'seg seg-' + p.kind, dataset: { kind: p.kind, from: p.from, to: p.to } });
        // Position within the transaction's box.
        const w = Math.max(1, end - start);
        seg.style.left = (100 * (p.from - start) / w).toFixed(4) + '%';
        seg.style.width = (100 * (p.to - p.from) / w).toFixed(4) + '%';
        grp.append(seg);
      }
      track.append(grp);
    }
    wf.append(el('div', { class: 'wf-row', dataset: { conn: cid } }, label, track));
  }
  const legend = el('p', { class: 'legend wf-legend' },
    [['synloss', 'SYN / SYN-ACK loss'], ['connect', 'connect'], ['tls', 'TLS'], ['request', 'request'], ['wait', 'wait (Tserver)'], ['transfer', 'transfer']]
      .map(([k, t]) => el('span', {}, el('i', { class: 'seg seg-' + k }), t))
      .concat([el('span', {}, el('i', { class: 'seg after-load-key' }), 'after load (not in Total)')]));
  return el('section', { class: 'card wide', id: 'waterfall-card' }, el('h2', {}, 'Waterfall'), legend, wf);
}

function txList(pv, txs, conns, offsets, pvOff, search) {
  const connIdx = new Map();
  let n = 0;
  for (const t of txs) if (!connIdx.has(t.connection_id)) connIdx.set(t.connection_id, ++n);
  return el('section', { class: 'card wide', id: 'tx-card' },
    el('h2', {}, `Transactions (${txs.length})`),
    el('div', { id: 'tx-list' }, txs.map((t) => el('details', { class: 'tx', id: 'tx-' + t.id, dataset: { id: t.id } },
      el('summary', {},
        el('span', { class: 'conn' }, `#${connIdx.get(t.connection_id)}`), ' ',
        el('span', { class: 'method' }, t.method || '?'), ' ',
        el('span', { class: 'host' }, t.host || ''), el('span', { class: 'url' }, t.url || ''), ' ',
        el('span', { class: 'status' + (t.status >= 400 ? ' bad' : '') }, String(t.status || '–')), ' ',
        el('span', { class: 'dur' }, fmtDur(t.total_ns)),
        (t.flags || []).includes('after_load') ? el('span', { class: 'after-load-tag' }, ' after load') : null, ' ',
        search[t.id] ? el('a', { href: search[t.id], class: 'tx-search', title: 'this transaction in search' }, 'in search ›') : null),
      el('table', { class: 'headers' }, el('tbody', {},
        hdr('Method', t.method), hdr('Host', t.host), hdr('URL', t.url), hdr('Status', t.status),
        hdr('Content-Type', t.content_type), hdr('Referer', t.referer), hdr('User-Agent', t.user_agent), hdr('Accept', t.accept),
        hdr('Start', fmtTime(t.start) + ' UTC (+' + fmtDur(offsets[t.id][0] - pvOff[0]) + ')'),
        hdr('Tconn / Ttls / Trequest / Tserver / Ttransfer', [t.tconn_ns, t.ttls_ns || 0, t.trequest_ns, t.tserver_ns, t.ttransfer_ns].map(fmtDur).join(' / ')),
        hdr('Total', fmtDur(t.total_ns)), hdr('Client RTT', fmtDur(t.rtt_client_ns)),
        hdr('Request / response bytes', `${fmtInt(t.request_bytes)} / ${fmtInt(t.response_bytes)} (body ${fmtInt(t.body_bytes)}, retransmitted ${fmtInt(t.retrans_bytes)})`),
        hdr('Client', `${t.client}:${t.client_port}`), hdr('Server', `${t.server}:${t.server_port}`),
        hdr('Flags', (t.flags || []).join(', ')), hdr('Transaction id', t.id)))))));
}

function hdr(name, value) {
  if (value === undefined || value === null || value === '') return null;
  return el('tr', {}, el('th', {}, name), el('td', {}, String(value)));
}
