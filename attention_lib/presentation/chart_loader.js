// Draws one interactive chart of the book (attention_lib.presentation.embed.chart_html
// calls this function in a script element of the page with the chart's container id, its
// Vega-Lite spec and the URLs of Vega, Vega-Lite and vega-embed: the site's own
// copies, then a CDN). Every chart on a page shares one load of the three scripts.
(function (id, spec, local, cdn) {
  function load(src) {
    return new Promise(function (ok, fail) {
      var s = document.createElement("script");
      s.src = src; s.async = false; s.onload = ok;
      s.onerror = function () { s.remove(); fail(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  }
  function loadAll(urls) {  // UMD builds: hide RequireJS so they define globals
    var define = window.define; window.define = undefined;
    return urls.reduce(function (p, u) { return p.then(function () { return load(u); }); },
                       Promise.resolve())
      .finally(function () { window.define = define; });
  }
  function check() { if (!window.vegaEmbed) throw new Error("vega-embed did not load"); }
  // The site's own copies first; elsewhere (JupyterLab, Colab) the relative
  // path may 404 or answer with an HTML page, so check before trusting it.
  window.attentionVega = window.attentionVega || (window.vegaEmbed ? Promise.resolve() :
      loadAll(local).then(check).catch(function () { return loadAll(cdn).then(check); }));
  window.attentionVega.then(function () {
    return vegaEmbed("#" + id + " .attention-chart-view", spec,
                     {mode: "vega-lite", renderer: "svg", actions: false});
  }).catch(function (err) {
    var view = document.querySelector("#" + id + " .attention-chart-view");
    view.style.overflowWrap = "anywhere";   // a long URL in the message must not widen the page
    view.textContent =
      "The interactive chart could not load (" + err.message + "); the figure above shows its data.";
  });
})
