import { el, params, fmtDur, fmtInt, classLabel } from './dom.js';

// Drill-down from the overview to the transactions behind a number: every
// link carries the overview's selection (records, range, class) plus what
// was clicked, so search shows exactly the records the chart counted.

// Durations go to search in ms (what people type). A bucket edge is whole
// ns; ns / 1e6 prints with at most six decimals and the server rounds it
// back to the same ns.
export const ms = (ns) => String(ns / 1e6);

// searchHref is the search page for the overview's selection with extra
// filters; a null value drops that filter.
export function searchHref(extra) {
  const p = params();
  const q = new URLSearchParams();
  for (const k of ['kind', 'last', 'from', 'to', 'class', 'sensor', 'theme']) if (p.get(k)) q.set(k, p.get(k));
  for (const [k, v] of Object.entries(extra || {})) {
    if (v === null || v === undefined || v === '') q.delete(k); else q.set(k, String(v));
  }
  if (q.get('comp') === 'total' && !q.get('min') && !q.get('max')) q.delete('comp');
  return '/search?' + q;
}

// timeFilter pins a dragged time range (seconds since the epoch, as the
// charts' x) to ms in UTC: the overview's relative "last" gives way to it.
export function timeFilter(from, to) {
  const iso = (s) => new Date(s).toISOString();
  return { last: null, from: iso(Math.floor(from * 1000)), to: iso(Math.ceil(to * 1000)) };
}

// bucketFilter is the duration filter of histogram buckets first..last:
// bucket 0 is open below and the last one open above, as the histogram
// counts them.
export function bucketFilter(edges, first, last, comp) {
  return {
    comp,
    min: first > 0 ? ms(edges[first]) : null,
    max: last + 1 < edges.length ? ms(edges[last + 1]) : null,
  };
}

export function bucketLabel(edges, first, last) {
  const lo = first > 0 ? fmtDur(edges[first]) : '0';
  return last + 1 < edges.length ? `${lo} – ${fmtDur(edges[last + 1])}` : `≥ ${lo}`;
}

let open = null;

export function closeMenu() {
  if (open) open.remove();
  open = null;
}

document.addEventListener('keydown', (e) => { if (e.key === 'Escape') closeMenu(); });
document.addEventListener('mousedown', (e) => { if (open && !open.contains(e.target)) closeMenu(); });

// drillTo follows the only choice at once, or offers the choices (one per
// class the chart shows) as links: a second click, never a guess.
export function drillTo(box, at, title, items) {
  if (items.length === 1) {
    location.assign(items[0].href);
    return;
  }
  closeMenu();
  const m = el('div', { class: 'drill-menu', id: 'drill-menu', role: 'menu' },
    el('div', { class: 'drill-title' }, title),
    items.map((it) => el('a', { href: it.href, role: 'menuitem', class: 'drill-link', dataset: { class: it.class ?? '*' } },
      it.label, it.count !== undefined ? ` (${fmtInt(it.count)})` : '')));
  // Styled here (CSSOM, allowed by the page's CSP) to keep it self-contained.
  Object.assign(m.style, {
    position: 'absolute', zIndex: '20', left: Math.max(0, at.left) + 'px', top: Math.max(0, at.top) + 'px',
    display: 'flex', flexDirection: 'column', gap: '2px', padding: '6px 10px', minWidth: '12em',
    background: 'var(--bg, #fff)', color: 'var(--fg, inherit)', border: '1px solid var(--line, #e5e7eb)',
    borderRadius: '6px', boxShadow: '0 4px 14px rgba(0,0,0,.18)', fontSize: '13px',
  });
  box.style.position = 'relative';
  box.append(m);
  open = m;
  const first = m.querySelector('a');
  if (first) first.focus();
}

// classItems offers "all classes" and each class, with their counts when
// known (count(c) returns undefined when not).
export function classItems(classes, filter, count) {
  const items = [];
  if (classes.length > 1) items.push({ label: 'All classes', href: searchHref({ ...filter, class: null }), class: null, count: count ? count(null) : undefined });
  for (const c of classes) {
    items.push({ label: classLabel(c), href: searchHref({ ...filter, class: c }), class: c, count: count ? count(c) : undefined });
  }
  return items;
}
