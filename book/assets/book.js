/* The book's own page script (loaded on every page via html_js_files). */

/* Widget fonts: the ipywidgets embed manager finds its icon fonts relative to its AMD module's
 * URL, which RequireJS resolves against the page ("book/chapters/@jupyter-widgets/..."); they sit
 * in _static/widgets/.  RequireJS reads a global `require` object as its configuration when it
 * loads, and this script runs before it (book/_ext/book_html.py gives it an early priority). */
(() => {
  const me = document.currentScript && document.currentScript.src;
  if (!me || window.require) return;
  const widgets = new URL("widgets", me).href;
  window.require = { paths: { "@jupyter-widgets/html-manager/dist": widgets } };
  window.__jupyter_widgets_assets_path__ = widgets + "/";
})();

/* MathJax: the widget manager typesets widget labels with MathJax 2's MathJax.Hub.Queue; the book
 * loads MathJax 3, which has no Hub.  Give it one that calls MathJax 3's typesetPromise. */
(() => {
  const hub = {
    Queue: (job) => {
      const mj = window.MathJax;
      const element = Array.isArray(job) ? job[2] : undefined;
      if (mj && typeof mj.typesetPromise === "function") {
        mj.typesetPromise(element ? [element] : undefined).catch(() => {});
      }
    },
  };
  const patch = () => {
    if (window.MathJax && !window.MathJax.Hub) window.MathJax.Hub = hub;
  };
  patch();
  document.addEventListener("DOMContentLoaded", patch);
  window.addEventListener("load", patch);
})();

/* Sidebar toggle: sphinx-book-theme 1.3 draws its own "Toggle primary sidebar" button in the
 * article header, while the handlers of pydata-sphinx-theme (the phone drawer) and of the book
 * theme (collapse on desktop) attach only to the FIRST ".primary-toggle" on the page, a navbar
 * icon this layout hides.  Forward clicks from every other toggle to that first one, so the
 * visible button opens the navigation on a phone and collapses it on a desktop. */
document.addEventListener("DOMContentLoaded", () => {
  const toggles = Array.from(document.querySelectorAll(".primary-toggle"));
  toggles.slice(1).forEach((button) => {
    button.addEventListener("click", (event) => {
      event.preventDefault();
      event.stopPropagation();
      toggles[0].click();
    });
  });
});

/* Widgets, once the manager has drawn them (asynchronously, so watch the page):
 * - every slider handle gets an accessible name (its label) and a spoken value (its readout);
 * - an explorer's stack of pre-rendered views never shrinks below the tallest view shown so far,
 *   so moving a slider does not make the page jump. */
(() => {
  const tallest = new WeakMap();
  const sizes = new ResizeObserver((entries) => {
    for (const { target } of entries) {
      const h = Math.max(tallest.get(target) || 0, target.getBoundingClientRect().height);
      tallest.set(target, h);
      target.style.minHeight = `${Math.ceil(h)}px`;
    }
  });
  const label = () => {
    document.querySelectorAll(".widget-slider, .widget-hslider").forEach((box) => {
      const name = box.querySelector(".widget-label");
      const readout = box.querySelector(".widget-readout");
      box.querySelectorAll('[role="slider"]').forEach((handle) => {
        if (name && name.textContent.trim()) handle.setAttribute("aria-label", name.textContent.trim());
        if (readout) handle.setAttribute("aria-valuetext", readout.textContent.trim());
      });
    });
    document.querySelectorAll(".book-explorer-view").forEach((stack) => {
      if (!tallest.has(stack)) {
        tallest.set(stack, 0);
        sizes.observe(stack);
      }
    });
  };
  const watch = new MutationObserver(label);
  document.addEventListener("DOMContentLoaded", () => {
    label();
    watch.observe(document.body, { childList: true, subtree: true, characterData: true });
  });
})();
