/* Attention from Scratch: figures that a narrow screen shrinks can be enlarged.
 *
 * A figure is drawn for the text column of a desktop browser (up to 720 CSS
 * px wide). On a phone the column is about 340 px wide and the figure, with
 * its labels, is shrunk to fit. Every figure shown narrower than its intended
 * width gets an "Enlarge figure" button under it (tapping the figure does the
 * same): it opens the figure at its intended size in an overlay that scrolls
 * inside itself, so the page never scrolls sideways. Escape, the Close button
 * or a tap outside the figure closes it, and focus returns to the button.
 * scripts/browser_check.py checks that text is readable either way.
 */
(() => {
  "use strict";
  const SELECTOR = ".bd-article .cell_output img, .bd-article figure img";
  const MIN_WIDTH = 50;        // smaller images are icons, not figures
  const SHRUNK = 0.95;         // rendered / intended width below which a figure can be enlarged

  const intendedWidth = (img) => {
    const set = /px$/.test(img.style.width) ? parseFloat(img.style.width)
                                            : parseFloat(img.getAttribute("width"));
    return set > 0 ? set : img.naturalWidth;
  };

  let overlay = null, opener = null;

  function close() {
    if (!overlay) return;
    overlay.remove();
    overlay = null;
    document.documentElement.classList.remove("figure-zoom-open");
    if (opener) opener.focus();
    opener = null;
  }

  function open(img, button) {
    close();
    opener = button;
    overlay = document.createElement("div");
    overlay.className = "figure-zoom-overlay";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-modal", "true");
    overlay.setAttribute("aria-label", "Enlarged figure");
    const bar = document.createElement("div");
    bar.className = "figure-zoom-bar";
    const closeButton = document.createElement("button");
    closeButton.type = "button";
    closeButton.className = "figure-zoom-close";
    closeButton.textContent = "Close";
    closeButton.addEventListener("click", close);
    bar.appendChild(closeButton);
    const scroller = document.createElement("div");
    scroller.className = "figure-zoom-scroll";
    const big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    big.style.width = intendedWidth(img) + "px";
    scroller.appendChild(big);
    overlay.append(bar, scroller);
    overlay.addEventListener("click", (e) => { if (e.target === overlay || e.target === scroller) close(); });
    document.body.appendChild(overlay);
    document.documentElement.classList.add("figure-zoom-open");
    closeButton.focus();
  }

  document.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });

  function update() {
    for (const img of document.querySelectorAll(SELECTOR)) {
      if (img.closest(".attention-chart, .figure-zoom-overlay") || !img.complete) continue;
      if (img.naturalWidth < MIN_WIDTH) continue;
      let button = img.figureZoomButton;
      if (!button) {
        button = document.createElement("button");
        button.type = "button";
        button.className = "figure-zoom-button";
        button.textContent = "Enlarge figure";
        button.addEventListener("click", () => open(img, button));
        img.addEventListener("click", (e) => {
          if (button.hidden) return;
          e.preventDefault();   // a figure in a link to its file opens here instead
          open(img, button);
        });
        img.figureZoomButton = button;
        // after the link around the image, if any: no button inside a link
        (img.closest("a") || img).insertAdjacentElement("afterend", button);
      }
      const rendered = img.getBoundingClientRect().width;
      const shrunk = rendered > 0 && rendered < SHRUNK * intendedWidth(img);
      button.hidden = !shrunk;
      img.classList.toggle("figure-zoomable", shrunk);
    }
  }

  const start = () => {
    update();
    for (const img of document.querySelectorAll(SELECTOR))
      if (!img.complete) img.addEventListener("load", update, { once: true });
    let pending = null;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(update, 100);
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
