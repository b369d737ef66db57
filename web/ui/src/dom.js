// Every string shown came from the network (URLs, Host, Referer,
// User-Agent). Build DOM only through these helpers: text goes in as text
// nodes, attributes via setAttribute, never innerHTML.

export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'dataset') {
        for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
      } else if (k === 'on') {
        for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      } else if (k === 'href') {
        e.setAttribute('href', safeHref(v));
      } else {
        e.setAttribute(k, v === true ? '' : String(v));
      }
    }
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else if (c instanceof Node) e.appendChild(c);
    else e.appendChild(document.createTextNode(String(c)));
  }
}

// Links are only ever to this server's own paths, built by us.
export function safeHref(v) {
  const s = String(v);
  if (s.startsWith('/') && !s.startsWith('//')) return s;
  if (s.startsWith('?') || s.startsWith('#')) return s;
  return '#';
}

export function clear(e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
}

export function svgEl(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

export async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
  let body;
  try { body = await r.json(); } catch { body = null; }
  if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText}`);
  return body;
}

// Duration in ns to a short human string.
export function fmtDur(ns) {
  if (ns === null || ns === undefined) return '–';
  const ms = ns / 1e6;
  if (ms >= 3600e3 && ms % 3600e3 === 0) return ms / 3600e3 + ' h';
  if (ms >= 120e3 && ms % 60e3 === 0) return ms / 60e3 + ' min';
  if (ms >= 10000) return (ms / 1000).toFixed(1) + ' s';
  if (ms >= 1000) return (ms / 1000).toFixed(2) + ' s';
  if (ms >= 100) return ms.toFixed(0) + ' ms';
  if (ms >= 10) return ms.toFixed(1) + ' ms';
  return ms.toFixed(2) + ' ms';
}

export function fmtTime(ns) {
  if (!ns) return '–';
  const d = new Date(Math.floor(ns / 1e6));
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

export function fmtInt(n) {
  return Number(n || 0).toLocaleString('en-US');
}

export function fmtBytes(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

// Class colours, shared with the Go report (web/report.go palette).
export const palette = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

export function classColor(classes, c) {
  const i = classes.indexOf(c);
  return palette[(i < 0 ? classes.length : i) % palette.length];
}

export function params() {
  return new URLSearchParams(location.search);
}

// Replace the page's query string so the view can be shared as a link.
export function setParams(p) {
  const q = p.toString();
  history.replaceState(null, '', location.pathname + (q ? '?' + q : ''));
}

export function showError(where, err) {
  const box = el('p', { class: 'error', role: 'alert' }, 'Error: ', String(err && err.message ? err.message : err));
  where.prepend(box);
}

export function classLabel(c) {
  return c === '' ? '(unclassified)' : c;
}

// partialNote says which ClickHouse shards were down while a page's
// numbers were read (their clients' records are missing), or nothing.
export function partialNote(missing) {
  if (!missing || !missing.length) return null;
  const which = missing.length === 1 ? `Shard ${missing[0]} was` : `Shards ${missing.join(', ')} were`;
  return el('p', { class: 'range-note partial', id: 'partial-note', dataset: { shards: missing.join(',') } },
    `${which} down: these numbers leave out the records stored there.`);
}
