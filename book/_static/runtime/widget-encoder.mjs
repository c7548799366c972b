// widget-encoder.mjs: all-MiniLM-L6-v2 live on chapter 14's page (loaded by widgets.mjs for a
// <div class="aft-widget" data-kind="encoder">, only when the page has one).
//
// Type a sentence: its WordPiece tokens, and the attention of a chosen layer and head (rows:
// the token that looks, columns: the tokens it looks at); type a second sentence: the cosine
// similarity of the two embeddings. The int8 weights (scripts/export_minilm.py, exported when
// the site is built, never committed) are fetched on the first press of Encode, with their size
// shown before the download starts and its progress while it runs, and checked against the
// manifest's SHA-256. Layers and heads are numbered from 0, as in the code.
import { loadEncoder } from "./encoder.mjs";
import { sha256Hex } from "./transformer.mjs";
import { h, blank, drawHeatmap, describe, fillSelect, waitingSelect, webDigest } from "./widgets.mjs";

/** The site's _static/models/minilm/ folder, from this module's own address. */
const FOLDER = new URL("../models/minilm/", import.meta.url);
let shared = null; // Promise<encoder>, shared by every encoder widget of the page

const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

/** Fetch a file as bytes, reporting progress(received, total). */
async function download(url, progress) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url.pathname.split("/").pop()} did not load (${r.status})`);
  const total = Number(r.headers.get("content-length")) || 0;
  if (!r.body || !total) return new Uint8Array(await r.arrayBuffer());
  const out = new Uint8Array(total);
  const reader = r.body.getReader();
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at + value.length > total) throw new Error("the download is longer than its stated size");
    out.set(value, at);
    at += value.length;
    progress(at, total);
  }
  if (at !== total) throw new Error(`the download stopped at ${at} of ${total} bytes`);
  return out;
}

/** The encoder, loaded once: the manifest (its size known first), then the checked weights. */
function loadShared(say) {
  if (!shared) {
    shared = (async () => {
      say("Fetching the model's description (vocabulary and layout)…");
      const manifest = await fetch(new URL("minilm.json", FOLDER)).then((r) => {
        if (!r.ok) throw new Error(`the model description minilm.json did not load (${r.status})`);
        return r.json();
      });
      say(`Downloading the weights: ${mb(manifest.bytes)} (int8)…`);
      const bytes = await download(new URL("minilm.bin", FOLDER), (got, total) =>
        say(`Downloading the weights: ${mb(got)} of ${mb(total)}…`));
      say("Checking the weights' SHA-256…");
      const digest = (await webDigest(bytes)) ?? sha256Hex(bytes); // else the runtime's own hash
      if (digest !== manifest.sha256) throw new Error("minilm.bin does not match its manifest's SHA-256");
      return loadEncoder(manifest, bytes.buffer);
    })();
    shared.catch(() => { shared = null; }); // let a later press try again
  }
  return shared;
}

export function mountEncoder(root) {
  const id = (s) => `${root.id}-${s}`;
  const first = h("textarea", { id: id("first"), rows: 2, spellcheck: "false" });
  first.value = root.dataset.prompt ?? "The cat sat on the mat because it was tired.";
  const second = h("textarea", { id: id("second"), rows: 2, spellcheck: "false" });
  second.value = root.dataset.second ?? "A tired cat was lying on the rug.";
  const layer = waitingSelect(id("layer"), "layer");
  const head = waitingSelect(id("head"), "head");
  const button = h("button", { type: "button", class: "aft-go" }, "Encode");
  const size = Number(root.dataset.bytes);
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    `Press Encode: the model (22.7 million parameters as int8${size ? `, ${mb(size)}` : ""}) ` +
    "downloads from this site on first use, once for the page.");
  const tokens = h("p", { class: "aft-output aft-pieces", role: "group", "aria-label": "The word pieces of the first sentence" });
  const canvas = h("canvas", { class: "aft-heatmap", role: "img", "aria-label": "No sentence encoded yet" });
  const heatText = h("p", { class: "aft-heat-text" });
  const similarity = h("p", { class: "aft-similarity", role: "status", "aria-live": "polite" });
  root.replaceChildren(
    h("p", { class: "aft-title" }, "all-MiniLM-L6-v2, running in your browser"),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("first") }, "Sentence"), first),
    h("div", { class: "aft-control aft-prompt" },
      h("label", { for: id("second") }, "Second sentence (for the similarity)"), second),
    h("div", { class: "aft-controls" },
      h("div", { class: "aft-control" }, h("label", { for: id("layer") }, "Layer"), layer),
      h("div", { class: "aft-control" }, h("label", { for: id("head") }, "Head"), head)),
    h("div", { class: "aft-actions" }, button),
    status, tokens, h("div", { class: "aft-heat" }, canvas), heatText, similarity,
  );
  root.classList.add("aft-live");

  let result = null; // {tokens, weights}
  let run = 0;

  function draw() {
    if (!result) return;
    const l = Number(layer.value) || 0;
    const hh = Number(head.value) || 0;
    const T = result.tokens.length;
    const w = result.weights[l][hh];
    const rows = Array.from({ length: T }, (_, i) => Array.from(w.subarray(i * T, (i + 1) * T)));
    const labels = result.tokens.map((t) => t.slice(0, 7));
    const text = `Layer ${l}, head ${hh}: each token (a row) and the tokens it attends to (columns)`;
    drawHeatmap(canvas, rows, labels, result.tokens, `${text}. ${describe(rows, labels, result.tokens)}.`);
    heatText.textContent = `${text}. Colour: the weight, from 0 to 1 (legend below the map).`;
  }
  layer.addEventListener("change", draw);
  head.addEventListener("change", draw);

  function fail(message) {
    // nothing stale stays on show beside an error
    result = null;
    tokens.replaceChildren();
    similarity.textContent = "";
    heatText.textContent = "";
    blank(canvas, "No attention map: see the message above");
    delete root.dataset.state;
    status.textContent = message;
    status.classList.add("aft-error");
  }

  async function encode() {
    const mine = ++run;
    status.classList.remove("aft-error");
    if (!first.value.trim()) return fail("Type a sentence first.");
    let enc;
    try {
      enc = await loadShared((m) => { if (mine === run) status.textContent = m; });
    } catch (err) {
      return mine === run ? fail(`The model did not load: ${err.message}`) : undefined;
    }
    if (mine !== run) return;
    fillSelect(layer, enc.config.n_layers, "layer");
    fillSelect(head, enc.config.n_heads, "head");
    status.textContent = "Encoding…";
    await new Promise((resolve) => setTimeout(resolve, 0));
    if (mine !== run) return;
    const blank = "has no word piece (only spaces or control characters): type some words.";
    const t0 = performance.now();
    let a;
    try {
      a = enc.attention(first.value);
    } catch (err) {
      return fail(/no word piece/.test(err.message) ? `The sentence ${blank}` : err.message);
    }
    const max = enc.config.max_tokens;
    result = a;
    tokens.replaceChildren(...a.tokens.flatMap((t, i) => [...(i ? [" "] : []),
      h("span", { class: t.startsWith("[") ? "aft-token aft-special" : "aft-token aft-piece" }, t)]));
    draw();
    const ms = performance.now() - t0; // from the press (weights loaded) to the first map
    root.dataset.mapMs = String(Math.round(ms));
    similarity.textContent = second.value.trim() ? "Encoding the second sentence…" : "";
    await new Promise((resolve) => setTimeout(resolve, 0)); // let the page draw the map
    if (mine !== run) return;
    let b = null;
    try {
      if (second.value.trim()) b = enc.attention(second.value);
    } catch (err) {
      return fail(/no word piece/.test(err.message) ? `The second sentence ${blank}` : err.message);
    }
    if (b) {
      let cos = 0;
      for (let i = 0; i < a.embedding.length; i++) cos += a.embedding[i] * b.embedding[i];
      root.dataset.similarity = cos.toFixed(4);
      similarity.textContent = `Cosine similarity of the two sentences' embeddings: ${cos.toFixed(3)} ` +
        "(1: the same direction; unrelated sentences score near 0).";
    } else {
      delete root.dataset.similarity;
      similarity.textContent = "Type a second sentence to see how similar the two are.";
    }
    const cut = [a, b].some((r) => r && r.truncated) ?
      ` A sentence was cut to its first ${max - 2} word pieces, as sentence-transformers cuts one past its limit (the browser's limit is ${max} tokens with [CLS] and [SEP]; the library's is 256).` : "";
    status.textContent = `${a.tokens.length} tokens ([CLS] and [SEP] included); its attention in ${Math.round(ms)} ms.${cut}`;
    root.dataset.state = "done";
  }

  button.addEventListener("click", encode);
  for (const box of [first, second]) {
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) encode();
    });
  }
}
