import './app.css';
import { el, clear, getJSON, showError } from './dom.js';
import { overview, prefetchOverview } from './overview.js';
import { search } from './search.js';
import { pageview } from './pageview.js';
import { whatif } from './whatif.js';
import { compare } from './compare.js';
import { start } from './live.js';

function theme() {
  const t = new URLSearchParams(location.search).get('theme');
  const dark = t === 'dark' || (t === 'auto' && matchMedia('(prefers-color-scheme: dark)').matches);
  document.body.classList.toggle('dark', dark);
  // Keep the theme when following the app's own links.
  if (t) {
    for (const a of document.querySelectorAll('header a')) {
      const u = new URL(a.getAttribute('href'), location.origin);
      u.searchParams.set('theme', t);
      a.setAttribute('href', u.pathname + u.search);
    }
  }
}

async function main() {
  theme();
  const page = document.body.dataset.page;
  const mainEl = document.getElementById('main');
  if (!['overview', 'search', 'pageview', 'whatif', 'compare'].includes(page)) { start(); return; }
  clear(mainEl);
  try {
    const first = page === 'overview' ? prefetchOverview() : null;
    const meta = await getJSON('/api/meta');
    if (page === 'overview') await overview(mainEl, meta, first);
    else if (page === 'search') await search(mainEl, meta);
    else if (page === 'whatif') await whatif(mainEl, meta);
    else if (page === 'compare') await compare(mainEl, meta);
    else await pageview(mainEl, meta);
  } catch (e) {
    showError(mainEl, e);
  }
  start();
  document.body.dataset.ready = '1';
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main);
else main();

export { el };
