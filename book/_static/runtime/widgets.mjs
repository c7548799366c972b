// widgets.mjs: the book's models, live on a chapter page.
//
// Each <div class="aft-widget" data-model="..."> (written by attention_lib.widget_html) becomes
// a small app: for a language model, a prompt box, temperature, top-k and top-p sliders, a seed
// and a Generate button; tokens appear as they are produced, and hovering, tapping or focusing
// a token draws where each head of the chosen layer looked from it. For the translator, an
// English sentence in, French out, and the cross-attention of a chosen layer and head.
// Weights are fetched from this site (_static/models/) on first use only.
import { loadModel } from "./transformer.mjs";

const MODELS = new Map(); // name -> Promise<model>, shared by every widget of a page

/** The site's _static/ folder, from this module's own address. */
const STATIC = new URL("../", import.meta.url);

function loadShared(name) {
  if (!MODELS.has(name)) {
    const promise = (async () => {
      const [manifest, weights] = await Promise.all([
        fetch(new URL(`models/${name}.json`, STATIC)).then((r) => {
          if (!r.ok) throw new Error(`the model description ${name}.json did not load (${r.status})`);
          return r.json();
        }),
        fetch(new URL(`models/${name}.bin`, STATIC)).then((r) => {
          if (!r.ok) throw new Error(`the weights ${name}.bin did not load (${r.status})`);
          return r.arrayBuffer();
        }),
      ]);
      return loadModel(manifest, weights);
    })();
    promise.catch(() => MODELS.delete(name)); // let a later click try again
    MODELS.set(name, promise);
  }
  return MODELS.get(name);
}

/** An element with attributes and children, in one call. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (v !== false && v !== undefined && v !== null) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c);
  return el;
}

const nextFrame = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A labelled range input with its value shown beside it. */
function slider(id, label, { min, max, step, value, format = String, help }) {
  const out = h("output", { for: id, class: "aft-value" }, format(value));
  const input = h("input", { type: "range", id, min, max, step, value, "aria-describedby": `${id}-help` });
  input.addEventListener("input", () => {
    out.textContent = format(Number(input.value));
  });
  const row = h("div", { class: "aft-control" },
    h("label", { for: id }, label), input, out, h("span", { id: `${id}-help`, class: "aft-help" }, help));
  return { row, input };
}

/** Show text (a character or a token) visibly: spaces, newlines and tabs get a glyph. */
function visible(piece) {
  return piece.replaceAll("\n", "↵").replaceAll("\t", "⇥").replaceAll(" ", "␣") || "∅";
}

// ---------------------------------------------------------------------------
// The heat map: rows are heads (or target tokens), columns the tokens looked at
// ---------------------------------------------------------------------------

function drawHeatmap(canvas, rows, rowLabels, colLabels, caption) {
  const width = Math.max(240, canvas.parentElement.clientWidth || 320);
  const labelW = 46;
  const nCols = colLabels.length;
  const cell = Math.max(6, Math.min(28, Math.floor((width - labelW - 4) / Math.max(1, nCols))));
  const cellH = 22;
  const top = 58;
  const dpr = window.devicePixelRatio || 1;
  const cssW = labelW + cell * nCols + 4;
  const cssH = top + cellH * rows.length + 4;
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.clearRect(0, 0, cssW, cssH);
  ctx.font = "12px sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillStyle = "#222";
  for (let c = 0; c < nCols; c++) {
    ctx.save();
    ctx.translate(labelW + c * cell + cell / 2 + 4, top - 4);
    ctx.rotate(-Math.PI / 3);
    ctx.fillText(colLabels[c].slice(0, 8), 0, 0);
    ctx.restore();
  }
  rows.forEach((row, r) => {
    ctx.fillStyle = "#222";
    ctx.fillText(rowLabels[r], 2, top + r * cellH + cellH / 2);
    let max = 0;
    for (const w of row) max = Math.max(max, w);
    row.forEach((w, c) => {
      const t = max > 0 ? w / max : 0; // each row scaled to its own largest weight
      const light = Math.round(98 - 68 * t);
      ctx.fillStyle = `hsl(215, 70%, ${light}%)`;
      ctx.fillRect(labelW + c * cell, top + r * cellH, cell - 1, cellH - 1);
    });
  });
  canvas.setAttribute("aria-label", caption);
}

/** "head 1 looked most at 'x' (0.62)" for each row: the heat map's text for screen readers. */
function describe(rows, rowLabels, colLabels) {
  return rows.map((row, r) => {
    let best = 0;
    row.forEach((w, c) => { if (w > row[best]) best = c; });
    return `${rowLabels[r]} looked most at "${colLabels[best]}" (${row[best].toFixed(2)})`;
  }).join("; ");
}

// ---------------------------------------------------------------------------
// A language model: prompt in, tokens out, attention on hover
// ---------------------------------------------------------------------------

const LM_DEFAULTS = {
  shakespeare: { prompt: "ROMEO:\n", maxNew: 200, title: "Write with the Shakespeare model" },
  stories260k: { prompt: "Once upon a time", maxNew: 120, title: "Write with stories260K" },
};

function mountLanguageModel(root, name) {
  const d = LM_DEFAULTS[name] || { prompt: "", maxNew: 100, title: `Write with ${name}` };
  const id = (s) => `${root.id}-${s}`;
  const prompt = h("textarea", { id: id("prompt"), rows: 3, spellcheck: "false" });
  prompt.value = root.dataset.prompt ?? d.prompt;
  const temperature = slider(id("temperature"), "Temperature", {
    min: 0, max: 2, step: 0.05, value: 0.8, format: (v) => v.toFixed(2),
    help: "0 always picks the most likely token; higher is more surprising",
  });
  const topK = slider(id("topk"), "Top-k", {
    min: 0, max: 100, step: 1, value: 0, format: (v) => (v === 0 ? "off" : String(v)),
    help: "sample only among the k most likely tokens (0: all)",
  });
  const topP = slider(id("topp"), "Top-p", {
    min: 0.05, max: 1, step: 0.05, value: 1, format: (v) => v.toFixed(2),
    help: "sample only among the most likely tokens whose probabilities add up to p",
  });
  const seed = h("input", { type: "number", id: id("seed"), min: 0, step: 1, value: 1, inputmode: "numeric" });
  const length = h("input", { type: "number", id: id("length"), min: 1, max: 500, step: 1, value: d.maxNew, inputmode: "numeric" });
  const button = h("button", { type: "button", class: "aft-go" }, "Generate");
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "Press Generate: the model (a few MB) loads on first use, from this site.");
  const output = h("div", { class: "aft-output", role: "group", "aria-label": "The prompt and the generated tokens: focus or hover a generated token to see where the heads looked" });
  const layer = h("select", { id: id("layer") });
  const canvas = h("canvas", { class: "aft-heatmap", role: "img", "aria-label": "No token chosen yet" });
  const heatText = h("p", { class: "aft-heat-text" }, "Hover, tap or focus a generated token.");

  root.replaceChildren(
    h("p", { class: "aft-title" }, d.title),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("prompt") }, "Prompt"), prompt),
    h("div", { class: "aft-controls" }, temperature.row, topK.row, topP.row,
      h("div", { class: "aft-control" }, h("label", { for: id("seed") }, "Seed"), seed),
      h("div", { class: "aft-control" }, h("label", { for: id("length") }, "New tokens"), length)),
    h("div", { class: "aft-actions" }, button),
    status,
    output,
    h("div", { class: "aft-control" }, h("label", { for: id("layer") }, "Layer shown"), layer),
    h("div", { class: "aft-heat" }, canvas),
    heatText,
  );

  let run = 0; // a new run cancels the one before
  let tokens = []; // {piece, attention?} for the prompt and every new token
  let chosen = -1;

  function show(index) {
    const tok = tokens[index];
    if (!tok || !tok.attention) return;
    chosen = index;
    output.querySelectorAll(".aft-chosen").forEach((el) => el.classList.remove("aft-chosen"));
    output.children[index]?.classList.add("aft-chosen");
    const l = Number(layer.value) || 0;
    const weights = tok.attention[l]; // [head] -> weights over positions 0..source
    const S = weights[0].length;
    const from = Math.max(0, S - 40); // the last 40 positions fit a phone's width
    const cols = tokens.slice(from, S).map((t) => visible(t.piece));
    const rows = weights.map((w) => Array.from(w.subarray(from, S)));
    const labels = rows.map((_, i) => `head ${i + 1}`);
    const source = visible(tokens[tok.source].piece);
    const text = `Layer ${l + 1}: where each head looked from "${source}" when it predicted "${visible(tok.piece)}"` +
      (from > 0 ? ` (the last ${S - from} of ${S} positions)` : "");
    drawHeatmap(canvas, rows, labels, cols, `${text}. ${describe(rows, labels, cols)}`);
    heatText.textContent = text + ".";
  }

  layer.addEventListener("change", () => show(chosen));
  output.addEventListener("pointerover", (e) => {
    const i = Number(e.target?.dataset?.index);
    if (Number.isInteger(i)) show(i);
  });
  output.addEventListener("focusin", (e) => {
    const i = Number(e.target?.dataset?.index);
    if (Number.isInteger(i)) show(i);
  });
  output.addEventListener("click", (e) => {
    const i = Number(e.target?.dataset?.index);
    if (Number.isInteger(i)) show(i);
  });

  function addToken(piece, attention, source) {
    const i = tokens.length;
    tokens.push({ piece, attention, source });
    const span = h(attention ? "button" : "span", {
      type: attention ? "button" : undefined,
      class: attention ? "aft-token aft-new" : "aft-token",
      "data-index": i,
      "aria-label": attention ? `generated token ${JSON.stringify(piece)}` : undefined,
    }, attention ? piece.replaceAll("\n", "↵") : piece);
    output.append(span);
    // a button does not break the line: show a generated newline as ↵ and break after it
    if (attention && piece.includes("\n")) output.append("\n");
  }

  async function generate() {
    const mine = ++run;
    const fail = (message) => {
      status.textContent = message;
      status.classList.add("aft-error");
    };
    status.classList.remove("aft-error");
    try {
      const text = prompt.value;
      if (text.trim() === "") return fail("Type a prompt first: the model continues your text.");
      const n = Number(length.value);
      if (!(Number.isInteger(n) && n >= 1 && n <= 500)) return fail("New tokens must be a whole number from 1 to 500.");
      const s = Number(seed.value);
      if (!(Number.isInteger(s) && s >= 0)) return fail("The seed must be a whole number, 0 or more.");
      status.textContent = "Loading the model…";
      const t0 = performance.now();
      const model = await loadShared(name);
      if (mine !== run) return;
      if (layer.options.length !== model.config.n_layers) {
        layer.replaceChildren(...Array.from({ length: model.config.n_layers }, (_, i) => h("option", { value: i }, `layer ${i + 1}`)));
      }
      let ids;
      try {
        ids = model.tokenizer.encode(text);
      } catch (err) {
        return fail(`This model cannot read that prompt: ${err.message}.`);
      }
      const limit = model.maxLen - 1;
      let note = "";
      if (ids.length > limit) {
        ids = ids.slice(-limit);
        note = ` The prompt is longer than the ${model.maxLen} tokens the model reads: it continues from the last ${limit}.`;
      }
      const room = Math.min(n, model.maxLen - ids.length);
      if (room < n) note += ` It stops after ${room} new tokens, where its context ends.`;
      output.replaceChildren();
      tokens = [];
      chosen = -1;
      ids.forEach((tok, i) => addToken(model.tokenizer.piece ? model.tokenizer.piece(tok) : String(tok), null, i));
      if (name === "stories260k" && tokens.length && tokens[0].piece === "<s>") output.firstChild.textContent = "";
      const opts = { temperature: Number(temperature.input.value), topK: Number(topK.input.value),
        topP: Number(topP.input.value), seed: s, attention: true };
      status.textContent = "Writing…";
      let first = null;
      let count = 0;
      for (const step of model.steps(ids, room, opts)) {
        if (mine !== run) return;
        if (first === null) first = performance.now() - t0;
        addToken(model.tokenizer.piece ? model.tokenizer.piece(step.id) : String(step.id), step.attention, step.position);
        count += 1;
        if (chosen < 0) show(tokens.length - 1);
        if (count % 4 === 0) await nextFrame(); // let the page draw the tokens so far
      }
      root.dataset.firstTokenMs = String(Math.round(first ?? 0));
      status.textContent = `${count} tokens; the first after ${Math.round(first ?? 0)} ms.${note}`;
      root.dataset.state = "done";
    } catch (err) {
      fail(`Something went wrong: ${err.message}`);
    }
  }

  button.addEventListener("click", generate);
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) generate();
  });
  for (const input of [temperature.input, topK.input, topP.input]) {
    input.addEventListener("change", () => { if (tokens.length) generate(); });
  }
}

// ---------------------------------------------------------------------------
// The translator: English in, French out, cross-attention on hover
// ---------------------------------------------------------------------------

function mountTranslator(root, name) {
  const id = (s) => `${root.id}-${s}`;
  const input = h("textarea", { id: id("english"), rows: 2, spellcheck: "false" });
  input.value = root.dataset.prompt ?? "I like green apples.";
  const beam = h("select", { id: id("beam") }, h("option", { value: 1 }, "greedy"), h("option", { value: 4 }, "beam of 4"));
  const button = h("button", { type: "button", class: "aft-go" }, "Translate");
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "Press Translate: the model loads on first use, from this site.");
  const output = h("p", { class: "aft-output aft-french", lang: "fr", role: "status", "aria-label": "The French translation" });
  const layer = h("select", { id: id("layer") });
  const head = h("select", { id: id("head") });
  const canvas = h("canvas", { class: "aft-heatmap", role: "img", "aria-label": "No translation yet" });
  let result = null;

  root.replaceChildren(
    h("p", { class: "aft-title" }, "Translate English into French"),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("english") }, "English"), input),
    h("div", { class: "aft-controls" },
      h("div", { class: "aft-control" }, h("label", { for: id("beam") }, "Decoding"), beam),
      h("div", { class: "aft-control" }, h("label", { for: id("layer") }, "Layer"), layer),
      h("div", { class: "aft-control" }, h("label", { for: id("head") }, "Head"), head)),
    h("div", { class: "aft-actions" }, button),
    status, output, h("div", { class: "aft-heat" }, canvas),
  );

  function draw() {
    if (!result || !result.cross.length) return;
    const l = Number(layer.value) || 0;
    const hh = Number(head.value) || 0;
    const model = result.model;
    const rows = result.cross.map((step) => Array.from(step[l][hh]));
    const rowLabels = result.ids.map((t) => visible(model.tokenizer.piece(t)).slice(0, 6));
    const colLabels = result.src.map((t) => visible(model.tokenizer.piece(t)));
    drawHeatmap(canvas, rows, rowLabels, colLabels,
      `Cross-attention of layer ${l + 1}, head ${hh + 1}: each French token (a row) over the English tokens. ` +
      describe(rows, rowLabels, colLabels));
  }
  layer.addEventListener("change", draw);
  head.addEventListener("change", draw);

  async function translate() {
    status.classList.remove("aft-error");
    const fail = (m) => { status.textContent = m; status.classList.add("aft-error"); };
    try {
      const text = input.value.trim();
      if (!text) return fail("Type an English sentence first.");
      status.textContent = "Loading the model…";
      const model = await loadShared(name);
      if (!layer.options.length) {
        layer.replaceChildren(...Array.from({ length: model.config.n_dec_layers }, (_, i) => h("option", { value: i }, `layer ${i + 1}`)));
        head.replaceChildren(...Array.from({ length: model.config.n_heads }, (_, i) => h("option", { value: i }, `head ${i + 1}`)));
      }
      status.textContent = "Translating…";
      await nextFrame();
      const out = model.translate(text, { beam: Number(beam.value), details: true });
      result = { ...out, model };
      output.textContent = out.text || "(no translation)";
      status.textContent = `${out.ids.length} French tokens from ${out.src.length} English tokens.` +
        (out.truncated ? ` The sentence was cut to its first ${out.src.length} tokens, as the library cuts it: translate one sentence at a time.` : "");
      root.dataset.state = "done";
      draw();
    } catch (err) {
      fail(`Something went wrong: ${err.message}`);
    }
  }
  button.addEventListener("click", translate);
  beam.addEventListener("change", () => { if (result) translate(); });
}

/** Turn every widget placeholder on the page into its app (once). */
export function mountAll(doc = document) {
  let n = 0;
  for (const root of doc.querySelectorAll(".aft-widget[data-model]:not([data-mounted])")) {
    root.dataset.mounted = "";
    if (!root.id) root.id = `aft-widget-${n}`;
    n += 1;
    const name = root.dataset.model;
    try {
      if (root.dataset.kind === "translator") mountTranslator(root, name);
      else mountLanguageModel(root, name);
      root.classList.add("aft-live");
    } catch (err) {
      root.append(h("p", { class: "aft-status aft-error" }, `This widget could not start: ${err.message}`));
    }
  }
}
