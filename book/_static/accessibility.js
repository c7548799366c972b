/* Attention from Scratch: accessible names for widgets the book's tools write.
 *
 * myst-nb writes every folded code cell's toggle as
 *   <summary aria-label="Toggle hidden content">Show code cell source</summary>
 * so a speech-input user who says what they see ("show code cell source")
 * reaches nothing (axe-core: label-content-name-mismatch). Without the label
 * the summary's name is its visible text, which says what it does. The same
 * for the theme's search field, labelled "Search" while it shows
 * "Search Ctrl+K".
 */
(() => {
  "use strict";
  const fix = () => {
    for (const el of document.querySelectorAll("summary[aria-label], .search-button-field[aria-label]"))
      if (el.textContent.trim()) el.removeAttribute("aria-label");
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fix);
  else fix();
})();
