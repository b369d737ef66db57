// A page's state is its URL, so a copied link reproduces the view. The
// shared controls write the URL with history.replaceState (dom.js
// setParams); commit() turns each user change into a history entry of its
// own, so the back button steps through the changes, and onPop tells the
// page when back or forward has put another state in the URL.

let committed = location.href;

// track starts from the URL as it is now (after a page's own defaults).
export function track() {
  committed = location.href;
}

export function commit() {
  const now = location.href;
  if (now === committed) return;
  history.replaceState(null, '', committed);
  history.pushState(null, '', now);
  committed = now;
}

export function onPop(fn) {
  window.addEventListener('popstate', () => {
    committed = location.href;
    fn();
  });
}

// setControl puts value v in the control with id, if the page has one.
export function setControl(id, v) {
  const e = document.getElementById(id);
  if (e) e.value = v;
}
