// widgets.mjs: the book's models, live on a chapter page.
//
// Each <div class="aft-widget" data-model="..."> (written by attention_lib.widget_html) becomes
// a small app: for a language model, a prompt box, temperature, top-k and top-p sliders, a seed
// and a Generate button; tokens appear as they are produced, and hovering, tapping or focusing
// a token draws where each head of the chosen layer looked from it. For the translator, an
// English sentence in, French out, and the cross-attention of a chosen layer and head.
// Weights are fetched from this site (_static/models/) on first use only, and checked
// against their manifest's SHA-256 before they run. Layers and heads are numbered from 0,
// as in the code ("layer 0, head 3"). Heat maps share one colour scale, weight 0 to 1.
// A language model's widget has head switches: any set of heads switched off (their
// outputs set to zero before W_O, the library's zero ablation) and the text written again.
import { loadModel, distribution, setZeroHeads } from "./transformer.mjs";
import { servedFile } from "./quant.mjs";

const MODELS = new Map(); // name -> Promise<model>, shared by every widget of a page

/** The site's _static/ folder, from this module's own address. */
const STATIC = new URL("../", import.meta.url);

/** A model of this site's _static/models/, loaded once a page (the other widget modules share it). */
export function loadShared(name) {
  if (!MODELS.has(name)) {
    const promise = (async () => {
      const [manifest, weights] = await Promise.all([
        fetch(new URL(`models/${servedFile(name)}.json`, STATIC)).then((r) => {
          if (!r.ok) throw new Error(`the model description ${name}.json did not load (${r.status})`);
          return r.json();
        }),
        fetch(new URL(`models/${servedFile(name)}.bin`, STATIC)).then((r) => {
          if (!r.ok) throw new Error(`the weights ${name}.bin did not load (${r.status})`);
          return r.arrayBuffer();
        }),
      ]);
      // not a secure context (no digest): loadModel computes it
      return loadModel(manifest, weights, { digest: await webDigest(weights) });
    })();
    promise.catch(() => MODELS.delete(name)); // let a later click try again
    MODELS.set(name, promise);
  }
  return MODELS.get(name);
}

/** The SHA-256 of bytes in hex by WebCrypto, faster than the runtime's own where the page may use it. */
export async function webDigest(bytes) {
  try {
    const d = await globalThis.crypto.subtle.digest("SHA-256", bytes);
    return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
  } catch {
    return undefined; // not a secure context
  }
}

/** An element with attributes and children, in one call. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (v !== false && v !== undefined && v !== null) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c);
  return el;
}

export const nextFrame = () => new Promise((resolve) => setTimeout(resolve, 0));

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

/** The colour of an attention weight w in [0, 1]: the same scale for every row and every map. */
const weightColour = (w) => `hsl(215, 70%, ${Math.round(98 - 68 * Math.min(1, Math.max(0, w)))}%)`;

/** An empty heat map, its label saying why: nothing stale stays on show beside an error. */
export function blank(canvas, label) {
  canvas.width = 0;
  canvas.height = 0;
  canvas.style.width = "0";
  canvas.style.height = "0";
  canvas.setAttribute("aria-label", label);
}

/** The 2-D context of a canvas cssW x cssH CSS px, drawn at the screen's pixel density. */
export function sized(canvas, cssW, cssH) {
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  return ctx;
}

export function drawHeatmap(canvas, rows, rowLabels, colLabels, caption) {
  const width = Math.max(240, canvas.parentElement.clientWidth || 320);
  const labelW = 58;
  const padR = 30; // a column label leans right past its cell: the last one ("[SEP]") needs room
  const nCols = colLabels.length;
  const cell = Math.max(6, Math.min(28, Math.floor((width - labelW - 4 - padR) / Math.max(1, nCols))));
  const cellH = 22;
  const top = 58;
  const legendH = 34;
  const cssW = Math.max(labelW + cell * nCols + 4 + padR, 230);
  const cssH = top + cellH * rows.length + 4 + legendH;
  const ctx = sized(canvas, cssW, cssH);
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
    row.forEach((w, c) => {
      ctx.fillStyle = weightColour(w); // absolute: a weight of 0.2 looks the same in every row
      ctx.fillRect(labelW + c * cell, top + r * cellH, cell - 1, cellH - 1);
    });
  });
  // the legend: the colour of every weight from 0 to 1
  const y = top + cellH * rows.length + 10;
  const x0 = labelW;
  const lw = 150;
  for (let i = 0; i < lw; i++) {
    ctx.fillStyle = weightColour(i / (lw - 1));
    ctx.fillRect(x0 + i, y, 1, 10);
  }
  ctx.strokeStyle = "#888";
  ctx.strokeRect(x0 - 0.5, y - 0.5, lw + 1, 11);
  ctx.fillStyle = "#222";
  ctx.textBaseline = "top";
  ctx.fillText("weight", 2, y);
  ctx.textAlign = "center";
  for (const v of [0, 0.5, 1]) ctx.fillText(String(v), x0 + v * (lw - 1), y + 13);
  ctx.textAlign = "start";
  canvas.setAttribute("aria-label", `${caption} Colour scale: weight 0 (white) to 1 (dark blue), the same for every row.`);
}

/** "head 0 looked most at 'x' (0.62)" for each row: the heat map's text for screen readers. */
export function describe(rows, rowLabels, colLabels) {
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
  shakespeare: { prompt: "ROMEO:\n", maxNew: 1000, title: "Write with the Shakespeare model" },
  stories260k: { prompt: "Once upon a time", maxNew: 200, title: "Write with stories260K" },
};
const MAX_NEW = 2000;

/** A select that waits for the model: disabled, with one option that says so. */
export function waitingSelect(id, what) {
  return h("select", { id, disabled: true }, h("option", { value: "" }, `${what} (once the model has loaded)`));
}

/** Fill a select with "layer 0", "layer 1", ... (numbered from 0, as in the code). */
export function fillSelect(select, n, what) {
  if (select.options.length === n && !select.disabled) return;
  select.replaceChildren(...Array.from({ length: n }, (_, i) => h("option", { value: i }, `${what} ${i}`)));
  select.disabled = false;
}

/**
 * The head switches of a language model's widget: a fieldset holding a table of checkboxes,
 * a row per layer and a column per head (each box named "layer l, head h"), filled once the
 * model has loaded, and an "All heads on" button. onChange() runs after a switch is flipped (by pointer or keyboard).
 * Returns {box, fill(nLayers, nHeads), heads() -> [[layer, head], ...], clear()}.
 */
export function headSwitches(id, onChange) {
  const rows = h("div", { class: "aft-switch-rows" },
    h("p", { class: "aft-help" }, "The switches appear once the model has loaded (press Generate)."));
  const allOn = h("button", { type: "button", id: `${id}-all-on`, disabled: true }, "All heads on");
  const box = h("fieldset", { class: "aft-switches", id },
    h("legend", {}, "Switch heads off"),
    h("p", { class: "aft-help" },
      "A head switched off writes zeros: its output, before the output projection, is set to 0 at every " +
      "position (the library's zero ablation). Its attention is still drawn, marked ✕. Flipping a switch " +
      "writes the text again with the same seed."),
    rows, allOn);
  const inputs = () => [...rows.querySelectorAll("input[type=checkbox]")];
  const heads = () => inputs().filter((c) => c.checked).map((c) => [Number(c.dataset.layer), Number(c.dataset.head)]);
  allOn.addEventListener("click", () => {
    if (!heads().length) return;
    for (const c of inputs()) c.checked = false;
    onChange();
  });
  function fill(nLayers, nHeads) {
    if (inputs().length === nLayers * nHeads) return;
    // a table: a row per layer, a column per head (both numbered from 0, as in the code)
    const cell = (l, hh) => h("td", {}, h("input", {
      type: "checkbox", "data-layer": l, "data-head": hh, "aria-label": `layer ${l}, head ${hh}`, onchange: onChange,
    }));
    rows.replaceChildren(h("table", { class: "aft-switch-table" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "head"),
        ...Array.from({ length: nHeads }, (_, hh) => h("th", { scope: "col" }, String(hh))))),
      h("tbody", {}, ...Array.from({ length: nLayers }, (_, l) => h("tr", {},
        h("th", { scope: "row" }, `layer ${l}`), ...Array.from({ length: nHeads }, (_, hh) => cell(l, hh)))))));
    allOn.disabled = false;
  }
  return { box, fill, heads, clear: () => { for (const c of inputs()) c.checked = false; } };
}

/**
 * The next-token bar: the most likely candidates at the last step and their probabilities
 * under the current temperature, top-k and top-p (what the sampler would draw from).
 */
function drawNextToken(box, model, logits, opts) {
  if (!logits) {
    box.replaceChildren();
    return;
  }
  let dist;
  try {
    dist = distribution(logits, opts);
  } catch (err) {
    box.replaceChildren(h("p", { class: "aft-help" }, err.message));
    return;
  }
  const shown = dist.ids.slice(0, 8);
  const rest = dist.probs.slice(8).reduce((a, b) => a + b, 0);
  const piece = (id) => visible(model.tokenizer.piece ? model.tokenizer.piece(id) : String(id));
  box.replaceChildren(
    h("p", { class: "aft-next-title" },
      `Next token: the ${shown.length} most likely of the ${dist.ids.length} the sampler keeps ` +
      `(temperature ${opts.temperature.toFixed(2)}, top-k ${opts.topK || "off"}, top-p ${opts.topP.toFixed(2)})`),
    h("ul", { class: "aft-bars" }, ...shown.map((id, r) => h("li", {},
      h("span", { class: "aft-bar-label" }, piece(id)),
      h("span", { class: "aft-bar-track", "aria-hidden": "true" },
        h("span", { class: "aft-bar", style: `width: ${(100 * dist.probs[r]).toFixed(1)}%` })),
      h("span", { class: "aft-bar-value" }, `${(100 * dist.probs[r]).toFixed(1)}%`)))),
    rest > 0 ? h("p", { class: "aft-help" }, `the other ${dist.ids.length - shown.length}: ${(100 * rest).toFixed(1)}% together`) : null,
  );
}

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
  const length = h("input", { type: "number", id: id("length"), min: 1, max: MAX_NEW, step: 1, value: d.maxNew, inputmode: "numeric" });
  const button = h("button", { type: "button", class: "aft-go" }, "Generate");
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "Press Generate: the model (a few MB) loads on first use, from this site.");
  const output = h("div", { class: "aft-output", role: "group", "aria-label": "The prompt and the generated tokens: focus or hover a generated token (arrow keys move) to see where the heads looked" });
  const next = h("div", { class: "aft-next", "aria-live": "polite" });
  const layer = waitingSelect(id("layer"), "layer");
  const canvas = h("canvas", { class: "aft-heatmap", role: "img", "aria-label": "No token chosen yet" });
  const heatText = h("p", { class: "aft-heat-text" }, "Hover, tap or focus a generated token.");
  // flipping a switch writes the text again (with the same seed), once there is one
  const switches = headSwitches(id("switches"), () => { if (tokens.length) generate(); });

  root.replaceChildren(
    h("p", { class: "aft-title" }, d.title),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("prompt") }, "Prompt"), prompt),
    h("div", { class: "aft-controls" }, temperature.row, topK.row, topP.row,
      h("div", { class: "aft-control" }, h("label", { for: id("seed") }, "Seed"), seed),
      h("div", { class: "aft-control" }, h("label", { for: id("length") }, "New tokens"), length)),
    h("div", { class: "aft-actions" }, button),
    status,
    output,
    next,
    switches.box,
    h("div", { class: "aft-control" }, h("label", { for: id("layer") }, "Layer shown"), layer),
    h("div", { class: "aft-heat" }, canvas),
    heatText,
  );

  let run = 0; // a new run cancels the one before
  let tokens = []; // {piece, attention?, source, offset} for the prompt and every new token
  let spans = [];
  let chosen = -1;
  let last = null; // {model, logits}: the last step, for the next-token bar

  const options = () => ({ temperature: Number(temperature.input.value), topK: Number(topK.input.value),
    topP: Number(topP.input.value) });
  const redrawNext = () => drawNextToken(next, last?.model, last?.logits, options());

  function clearHeat(message) {
    blank(canvas, message);
    heatText.textContent = message;
  }

  function show(index) {
    const tok = tokens[index];
    if (!tok || !tok.attention) return;
    if (chosen >= 0 && spans[chosen]) {
      spans[chosen].classList.remove("aft-chosen");
      spans[chosen].tabIndex = -1;
    }
    chosen = index;
    spans[index].classList.add("aft-chosen");
    spans[index].tabIndex = 0; // one tab stop in the output: the chosen token (arrows move)
    const l = Number(layer.value) || 0;
    const weights = tok.attention[l]; // [head] -> weights over the window's positions
    const S = weights[0].length;
    const from = Math.max(0, S - 40); // the last 40 positions fit a phone's width
    const cols = tokens.slice(tok.offset + from, tok.offset + S).map((t) => visible(t.piece));
    const rows = weights.map((w) => Array.from(w.subarray(from, S)));
    const off = tok.off ?? new Set();
    const labels = rows.map((_, i) => (off.has(`${l}:${i}`) ? `head ${i} ✕` : `head ${i}`));
    const source = visible(tokens[tok.source].piece);
    const text = `Layer ${l}: where each head looked from "${source}" when it predicted "${visible(tok.piece)}"` +
      (from > 0 || tok.offset > 0 ? ` (the last ${S - from} of the ${S} positions it read)` : "");
    drawHeatmap(canvas, rows, labels, cols, `${text}. ${describe(rows, labels, cols)}.`);
    heatText.textContent = `${text}. Colour: the weight, from 0 to 1 (legend below the map).` +
      (labels.some((r) => r.endsWith("✕")) ? " ✕: a head switched off (its pattern is drawn; its output is zero)." : "");
  }

  layer.addEventListener("change", () => show(chosen));
  const pick = (e) => {
    const i = Number(e.target?.dataset?.index);
    if (Number.isInteger(i)) show(i);
  };
  output.addEventListener("pointerover", pick);
  output.addEventListener("focusin", pick);
  output.addEventListener("click", pick);
  output.addEventListener("keydown", (e) => {
    if (chosen < 0 || !["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) return;
    const generated = tokens.map((t, i) => (t.attention ? i : -1)).filter((i) => i >= 0);
    const at = generated.indexOf(chosen);
    const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: generated.length - 1 }[e.key];
    if (to >= 0 && to < generated.length) {
      e.preventDefault();
      spans[generated[to]].focus();
    }
  });

  function addToken(piece, step) {
    const i = tokens.length;
    tokens.push({ piece, attention: step?.attention, source: step?.position, offset: step?.offset ?? 0, off: step?.off });
    // Inline spans, not buttons (a button is an inline block: a line could break inside a
    // word between two of them); the text flows and wraps only where the words do.
    const span = h("span", {
      class: step ? "aft-token aft-new" : "aft-token",
      "data-index": i,
      role: step ? "button" : undefined,
      tabindex: step ? -1 : undefined,
      "aria-label": step ? `generated token ${JSON.stringify(piece)}` : undefined,
    }, step ? piece.replaceAll("\n", "↵\n") : piece);
    spans.push(span);
    return span;
  }

  async function generate() {
    const mine = ++run;
    const fail = (message) => {
      // nothing stale stays on show beside an error
      output.replaceChildren();
      tokens = [];
      spans = [];
      chosen = -1;
      last = null;
      redrawNext();
      clearHeat("No tokens: see the message above.");
      delete root.dataset.state;
      status.textContent = message;
      status.classList.add("aft-error");
    };
    status.classList.remove("aft-error");
    try {
      const text = prompt.value;
      if (text.trim() === "") return fail("Type a prompt first: the model continues your text.");
      const n = Number(length.value);
      if (!(Number.isInteger(n) && n >= 1 && n <= MAX_NEW)) return fail(`New tokens must be a whole number from 1 to ${MAX_NEW}.`);
      const s = Number(seed.value);
      if (!(Number.isInteger(s) && s >= 0 && s < 2 ** 32)) return fail("The seed must be a whole number from 0 to 4294967295.");
      status.textContent = "Loading the model…";
      const t0 = performance.now();
      const model = await loadShared(name);
      if (mine !== run) return;
      fillSelect(layer, model.config.n_layers, "layer");
      switches.fill(model.config.n_layers, model.config.n_heads);
      const off = setZeroHeads(model, switches.heads()); // this run's switches (the model is the page's)
      let ids;
      try {
        ids = model.tokenizer.encode(text);
      } catch (err) {
        return fail(`This model cannot read that prompt: ${err.message}.`);
      }
      let note = "";
      if (ids.length > model.maxLen) {
        note = ` The prompt is longer than the ${model.maxLen} tokens the model reads: it continues from the last ${model.maxLen}.`;
      }
      if (ids.length + n > model.maxLen) {
        note += ` Past its context of ${model.maxLen} tokens the model reads the last ${model.maxLen / 2} to ${model.maxLen} tokens (the window is re-encoded from its last half when it fills).`;
      }
      output.replaceChildren();
      tokens = [];
      spans = [];
      chosen = -1;
      last = null;
      const start = Math.max(0, ids.length - 400); // a very long prompt: its end is what matters
      const shown = ids.map((tok) => (model.tokenizer.piece ? model.tokenizer.piece(tok) : String(tok)));
      if (name === "stories260k" && shown[0] === "<s>") shown[0] = "";
      if (start > 0) output.append(h("span", { class: "aft-help" }, `(${start} earlier prompt tokens) `));
      const promptSpans = shown.map((p) => addToken(p, null));
      output.append(...promptSpans.slice(start));
      const opts = { ...options(), seed: s, attention: true };
      status.textContent = "Writing…";
      let first = null;
      let count = 0;
      let pending = [];
      for (const step of model.steps(ids, n, opts)) {
        if (mine !== run) return;
        step.off = off;
        if (first === null) first = performance.now() - t0;
        pending.push(addToken(model.tokenizer.piece ? model.tokenizer.piece(step.id) : String(step.id), step));
        last = { model, logits: step.logits };
        count += 1;
        if (count % 8 === 0 || count === n) {
          output.append(...pending); // let the page draw the tokens so far
          pending = [];
          if (chosen < 0) show(tokens.length - 1);
          await nextFrame();
          if (mine !== run) return;
        }
      }
      output.append(...pending);
      if (chosen < 0) show(tokens.length - 1);
      redrawNext();
      root.dataset.firstTokenMs = String(Math.round(first ?? 0));
      root.dataset.headsOff = String(off.size);
      const offNote = off.size ? ` ${off.size} head${off.size > 1 ? "s" : ""} switched off: ${[...off].map((k) => k.replace(":", ".")).join(", ")} (layer.head).` : "";
      status.textContent = `${count} tokens; the first after ${Math.round(first ?? 0)} ms.${offNote}${note}`;
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
    input.addEventListener("input", redrawNext); // the bar reshapes as the slider moves
    input.addEventListener("change", () => { if (tokens.length) generate(); });
  }
}

// ---------------------------------------------------------------------------
// The translator: English in, French out, cross-attention on hover
// ---------------------------------------------------------------------------

function mountTranslator(root, name) {
  const id = (s) => `${root.id}-${s}`;
  const input = h("textarea", { id: id("english"), rows: 2, spellcheck: "false" });
  // an adjective that French puts after its noun, with its agreement, which the model gets right
  input.value = root.dataset.prompt ?? "I bought a blue car.";
  const beam = h("select", { id: id("beam") }, h("option", { value: 1 }, "greedy"), h("option", { value: 4 }, "beam of 4"));
  const button = h("button", { type: "button", class: "aft-go" }, "Translate");
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "Press Translate: the model loads on first use, from this site.");
  const output = h("p", { class: "aft-output aft-french", lang: "fr", role: "status", "aria-label": "The French translation" });
  const layer = waitingSelect(id("layer"), "layer");
  const head = waitingSelect(id("head"), "head");
  const canvas = h("canvas", { class: "aft-heatmap", role: "img", "aria-label": "No translation yet" });
  const note = h("p", { class: "aft-help aft-space-note" },
    "␣ marks a space. The tokenizer keeps the space before a word inside the word's first token " +
    "(\"␣car\" is \" car\", one token), so ␣ begins most words; a word it splits into pieces " +
    "shows its later pieces without one (\"␣bl\", \"ue\").");
  let result = null;

  root.replaceChildren(
    h("p", { class: "aft-title" }, "Translate English into French"),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("english") }, "English"), input),
    h("div", { class: "aft-controls" },
      h("div", { class: "aft-control" }, h("label", { for: id("beam") }, "Decoding"), beam),
      h("div", { class: "aft-control" }, h("label", { for: id("layer") }, "Layer"), layer),
      h("div", { class: "aft-control" }, h("label", { for: id("head") }, "Head"), head)),
    h("div", { class: "aft-actions" }, button),
    status, output, h("div", { class: "aft-heat" }, canvas), note,
  );

  function draw() {
    if (!result || !result.cross.length) return;
    const l = Number(layer.value) || 0;
    const hh = Number(head.value) || 0;
    const model = result.model;
    const rows = result.cross.map((step) => Array.from(step[l][hh]));
    const rowLabels = result.ids.map((t) => visible(model.tokenizer.piece(t)).slice(0, 7));
    const colLabels = result.src.map((t) => visible(model.tokenizer.piece(t)));
    drawHeatmap(canvas, rows, rowLabels, colLabels,
      `Cross-attention of layer ${l}, head ${hh}: each French token (a row) over the English tokens. ` +
      `${describe(rows, rowLabels, colLabels)}.`);
  }
  layer.addEventListener("change", draw);
  head.addEventListener("change", draw);

  async function translate() {
    status.classList.remove("aft-error");
    const fail = (m) => {
      // nothing stale stays on show beside an error
      result = null;
      output.textContent = "";
      blank(canvas, "No translation: see the message above");
      delete root.dataset.state;
      status.textContent = m;
      status.classList.add("aft-error");
    };
    try {
      const text = input.value.trim();
      if (!text) return fail("Type an English sentence first.");
      status.textContent = "Loading the model…";
      const model = await loadShared(name);
      fillSelect(layer, model.config.n_dec_layers, "layer");
      fillSelect(head, model.config.n_heads, "head");
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

/** The widget kinds whose app is a module of its own, and the function that mounts one. */
const OWN_MODULES = new Map([
  ["encoder", { module: "./widget-encoder.mjs", mount: "mountEncoder" }],
  ["window", { module: "./widget-window.mjs", mount: "mountWindow" }],
  ["smollm2", { module: "./widget-smollm2.mjs", mount: "mountSmolLM2" }],
]);

/** Turn every widget placeholder on the page into its app (once). */
export function mountAll(doc = document) {
  // the training widgets (data-train) live in their own module, loaded where a page has one
  if (doc.querySelector(".aft-widget[data-train]:not([data-mounted])")) {
    import("./widget-train.mjs").then((m) => m.mountTraining(doc)).catch(() => {});
  }
  let n = 0;
  for (const root of doc.querySelectorAll(".aft-widget[data-model]:not([data-mounted])")) {
    root.dataset.mounted = "";
    if (!root.id) root.id = `aft-widget-${n}`;
    n += 1;
    const name = root.dataset.model;
    try {
      const own = OWN_MODULES.get(root.dataset.kind);
      if (own) {
        // its own module, fetched only on a page that has one (it imports this one's helpers)
        import(own.module).then((m) => m[own.mount](root, name)).catch((err) => root.append(
          h("p", { class: "aft-status aft-error" }, `This widget could not start: ${err.message}`)));
        continue; // the module's mount marks it live
      } else if (root.dataset.kind === "translator") mountTranslator(root, name);
      else mountLanguageModel(root, name);
      root.classList.add("aft-live");
    } catch (err) {
      root.append(h("p", { class: "aft-status aft-error" }, `This widget could not start: ${err.message}`));
    }
  }
}
