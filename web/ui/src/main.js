import './app.css';
import { el, clear, getJSON, showError } from './dom.js';
import { overview } from './overview.js';
import { search } from './search.js';
import { pageview } from './pageview.js';
import { start } from './live.js';

async function main() {
  const page = document.body.dataset.page;
  const mainEl = document.getElementById('main');
  if (!['overview', 'search', 'pageview'].includes(page)) { start(); return; }
  clear(mainEl);
  try {
    const meta = await getJSON('/api/meta');
    if (page === 'overview') await overview(mainEl, meta);
    else if (page === 'search') await search(mainEl, meta);
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
