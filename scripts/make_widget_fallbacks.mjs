// The static figure each live widget shows before its script runs, or without JavaScript:
// a greedy continuation of the widget's first prompt and, as a heat map, where each head of
// the last layer looked from the last position (for the translator: the sentence, its
// translation and one cross-attention head). Drawn with the runtime itself, from the exported
// weights, into book/_static/models/<name>.fallback.svg (inlined by attention_lib.widget_html);
// for the encoder, a sentence's word pieces, one head's attention and a similarity.
//
//   node scripts/make_widget_fallbacks.mjs              # every widget's figure
//   node scripts/make_widget_fallbacks.mjs translator   # only the ones named
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel } from "../book/_static/runtime/transformer.mjs";
import { loadEncoder } from "../book/_static/runtime/encoder.mjs";
import { streamSteps } from "../book/_static/runtime/window.mjs";

const dir = fileURLToPath(new URL("../book/_static/models/", import.meta.url));
const only = process.argv.slice(2);
const wanted = (name) => only.length === 0 || only.includes(name);
const PROMPTS = { shakespeare: ["ROMEO:\n", 80], stories260k: ["Once upon a time", 40] };

const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const shown = (p) => p.replaceAll("\n", "↵").replaceAll(" ", "␣") || "∅";

function wrap(text, width) {
  const lines = [];
  for (const para of text.split("\n")) {
    let line = "";
    for (const word of para.split(" ")) {
      if ((line + " " + word).trim().length > width && line) {
        lines.push(line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    lines.push(line);
  }
  return lines;
}

/** An SVG: title, wrapped text, and a heat map (rows x cols) on the widgets' absolute scale, 0 to 1, with its legend. */
function svg(title, text, rows, rowLabels, colLabels, caption) {
  const lines = wrap(text, 60);
  const cell = 22;
  const left = 70;
  const textH = 24 + lines.length * 18;
  const top = textH + 70;
  const W = Math.max(560, left + cell * colLabels.length + 10);
  const captionLines = wrap(caption, 80); // about 500 px of 12-px text: inside the 560-px figure
  const legend = 34;
  const H = top + cell * rows.length + 14 + legend + captionLines.length * 16;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" role="img" aria-label="${esc(caption)}">`,
    `<title>${esc(caption)}</title>`,
    `<text x="4" y="16" font-family="sans-serif" font-size="14" font-weight="bold">${esc(title)}</text>`];
  lines.forEach((l, i) => out.push(`<text x="4" y="${38 + i * 18}" font-family="monospace" font-size="13" xml:space="preserve">${esc(l)}</text>`));
  colLabels.forEach((c, j) => {
    const x = left + j * cell + cell / 2;
    out.push(`<text transform="translate(${x + 4},${top - 6}) rotate(-60)" font-family="monospace" font-size="11">${esc(c.slice(0, 8))}</text>`);
  });
  rows.forEach((row, i) => {
    const y = top + i * cell;
    out.push(`<text x="4" y="${y + 15}" font-family="sans-serif" font-size="12">${esc(rowLabels[i])}</text>`);
    row.forEach((w, j) => {
      const light = Math.round(98 - 68 * Math.min(1, Math.max(0, w))); // the same scale in every row
      out.push(`<rect x="${left + j * cell}" y="${y}" width="${cell - 1}" height="${cell - 1}" fill="hsl(215,70%,${light}%)"/>`);
    });
  });
  const ly = top + cell * rows.length + 10;
  out.push(`<text x="4" y="${ly + 10}" font-family="sans-serif" font-size="12">weight</text>`);
  for (let i = 0; i < 20; i++) {
    out.push(`<rect x="${left + i * 8}" y="${ly}" width="8" height="10" fill="hsl(215,70%,${Math.round(98 - 68 * (i / 19))}%)"/>`);
  }
  for (const v of [0, 0.5, 1]) {
    out.push(`<text x="${left + v * 152 + 4}" y="${ly + 24}" font-family="sans-serif" font-size="11" text-anchor="middle">${v}</text>`);
  }
  captionLines.forEach((l, i) => {
    const y = top + cell * rows.length + 20 + legend + i * 16;
    out.push(`<text x="4" y="${y}" font-family="sans-serif" font-size="12">${esc(l)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}

/**
 * The window widget's figure: 600 characters written through a window of 64 and 4 sinks
 * (seed 1, temperature 0.8), and the memory of keys and values against characters written,
 * window + sinks (flat) against full attention (growing), from the runtime's own counts.
 */
function windowFigure(model) {
  const ids = model.tokenizer.encode("ROMEO:\n");
  const n = 600;
  const run = (window, sinks) => [...streamSteps(model, ids, n, { window, sinks, temperature: 0.8, seed: 1 })];
  const windowed = run(64, 4);
  const full = run(null, 0);
  const text = model.tokenizer.decode(windowed.map((s) => s.id)).slice(-360);
  const lines = wrap(`…${text}`, 60);
  const W = 560;
  const top = 40 + lines.length * 18;
  const left = 64;
  const plotW = W - left - 20;
  const plotH = 140;
  const yMax = full[n - 1].bytes * 1.05;
  const x = (i) => left + (i / n) * plotW;
  const y = (b) => top + plotH - (b / yMax) * plotH;
  const path = (steps) => steps.map((s, i) => `${i ? "L" : "M"}${x(i + 1).toFixed(1)},${y(s.bytes).toFixed(1)}`).join("");
  const kib = (b) => `${(b / 1024).toFixed(1)} KiB`;
  const caption = `Memory of keys and values against characters written: with a window of 64 and 4 sinks it stays at ` +
    `${kib(windowed[n - 1].bytes)} once the window is full; full attention grows to ${kib(full[n - 1].bytes)} ` +
    `after ${n} characters, one row a character, without end.`;
  const captionLines = wrap(caption, 80);
  const H = top + plotH + 50 + captionLines.length * 16;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" role="img" aria-label="${esc(caption)}">`,
    `<title>${esc(caption)}</title>`,
    `<text x="4" y="16" font-family="sans-serif" font-size="14" font-weight="bold">${esc(`The last characters of ${n} written through a window of 64 with 4 sinks`)}</text>`];
  lines.forEach((l, i) => out.push(`<text x="4" y="${38 + i * 18}" font-family="monospace" font-size="13" xml:space="preserve">${esc(l)}</text>`));
  out.push(`<path d="M${left},${top}V${top + plotH}H${left + plotW}" fill="none" stroke="#555"/>`);
  out.push(`<path d="${path(full)}" fill="none" stroke="#a40000" stroke-width="2" stroke-dasharray="6 3"/>`);
  out.push(`<path d="${path(windowed)}" fill="none" stroke="#2f5d9b" stroke-width="2"/>`);
  out.push(`<text x="4" y="${y(full[n - 1].bytes) + 4}" font-family="sans-serif" font-size="11">${kib(full[n - 1].bytes)}</text>`);
  out.push(`<text x="4" y="${y(windowed[n - 1].bytes) + 4}" font-family="sans-serif" font-size="11">${kib(windowed[n - 1].bytes)}</text>`);
  out.push(`<text x="${left + plotW}" y="${top + plotH + 16}" font-family="sans-serif" font-size="11" text-anchor="end">${n} characters</text>`);
  out.push(`<text x="${left + 8}" y="${y(full[n - 1].bytes) + 4}" font-family="sans-serif" font-size="12" fill="#a40000">full attention</text>`);
  out.push(`<text x="${left + plotW}" y="${y(windowed[n - 1].bytes) - 6}" font-family="sans-serif" font-size="12" fill="#2f5d9b" text-anchor="end">window 64 + 4 sinks</text>`);
  captionLines.forEach((l, i) => out.push(`<text x="4" y="${top + plotH + 36 + i * 16}" font-family="sans-serif" font-size="12">${esc(l)}</text>`));
  out.push("</svg>");
  return out.join("\n") + "\n";
}

for (const name of ["shakespeare", "stories260k", "translator", "shakespeare_window"]) {
  if (!wanted(name) || !existsSync(`${dir}${name}.json`)) continue;
  const model = loadModel(JSON.parse(readFileSync(`${dir}${name}.json`, "utf8")), readFileSync(`${dir}${name}.bin`));
  let figure;
  if (name === "shakespeare_window") {
    figure = windowFigure(model);
  } else if (name === "translator") {
    const english = "I bought a blue car."; // the live widget's default: reordered, and right
    const out = model.translate(english, { details: true });
    const l = model.config.n_dec_layers - 1;
    const rows = out.cross.map((step) => Array.from(step[l][0]));
    figure = svg("Translate English into French", `${english}\n→ ${out.text}`, rows,
      out.ids.map((t) => shown(model.tokenizer.piece(t)).slice(0, 8)), out.src.map((t) => shown(model.tokenizer.piece(t))),
      `Cross-attention of layer ${l}, head 0 (numbered from 0): each French token (row) over the English tokens (columns); colour: the weight, 0 to 1.`);
  } else {
    const [prompt, n] = PROMPTS[name];
    const ids = model.tokenizer.encode(prompt);
    const steps = [...model.steps(ids, n, { temperature: 0, attention: true })];
    const all = [...ids, ...steps.map((s) => s.id)];
    const last = steps[steps.length - 1];
    const l = model.config.n_layers - 1;
    const S = last.attention[l][0].length;
    const from = Math.max(0, S - 24);
    const rows = last.attention[l].map((w) => Array.from(w.subarray(from, S)));
    const cols = all.slice(from, S).map((t) => shown(model.tokenizer.piece(t)));
    figure = svg(`Greedy continuation of "${shown(prompt)}"`, model.tokenizer.decode(all), rows,
      rows.map((_, i) => `head ${i}`), cols,
      `Layer ${l} (numbered from 0): where each head looked from the last position (columns: the last ${S - from} tokens); colour: the weight, 0 to 1.`);
  }
  writeFileSync(`${dir}${name}.fallback.svg`, figure);
  console.log(`${name}: ${dir}${name}.fallback.svg`);
}

// all-MiniLM-L6-v2 (chapter 14): the tokens of a sentence, the head that looks most at the
// previous token, and the similarity of two sentences (weights exported by export_minilm.py)
if (wanted("minilm") && existsSync(`${dir}minilm/minilm.json`)) {
  const enc = loadEncoder(JSON.parse(readFileSync(`${dir}minilm/minilm.json`, "utf8")),
    readFileSync(`${dir}minilm/minilm.bin`));
  const [a, b] = ["The cat sat on the mat because it was tired.", "A tired cat was lying on the rug."];
  const out = enc.attention(a);
  const other = enc.attention(b);
  const T = out.tokens.length;
  let best = [0, 0, -1];
  out.weights.forEach((layer, l) => layer.forEach((w, hh) => {
    let s = 0;
    for (let i = 1; i < T; i++) s += w[i * T + i - 1];
    if (s / (T - 1) > best[2]) best = [l, hh, s / (T - 1)];
  }));
  const [l, hh] = best;
  const w = out.weights[l][hh];
  const rows = Array.from({ length: T }, (_, i) => Array.from(w.subarray(i * T, (i + 1) * T)));
  let cos = 0;
  for (let i = 0; i < out.embedding.length; i++) cos += out.embedding[i] * other.embedding[i];
  const figure = svg("all-MiniLM-L6-v2: word pieces, attention, similarity",
    `${out.tokens.join(" ")}\nsimilarity to "${b}": ${cos.toFixed(3)}`, rows,
    out.tokens.map((t) => t.slice(0, 8)), out.tokens,
    `Layer ${l}, head ${hh} (numbered from 0), the head that looks most at the previous token: each token (row) over the tokens it attends to (columns); colour: the weight, 0 to 1.`);
  writeFileSync(`${dir}minilm.fallback.svg`, figure);
  console.log(`minilm: ${dir}minilm.fallback.svg`);
}

// SmolLM2-135M-Instruct (the SmolLM2 chapter's chat widget): its greedy reply to a chat
// message and where the heads of layer 18 looked from the reply's last token, over the first
// token and the newest ones; read from the installed wheel's GGUF (SMOLLM2_GGUF, or
// attention_lib.models.smollm2.gguf_path()).
{
  const { spawnSync } = await import("node:child_process");
  const root = fileURLToPath(new URL("../", import.meta.url));
  const gguf = process.env.SMOLLM2_GGUF || spawnSync(existsSync(`${root}.venv/bin/python`) ? `${root}.venv/bin/python` : "python3",
    ["-c", "from attention_lib.models.smollm2 import gguf_path; print(gguf_path())"], { cwd: root, encoding: "utf8" }).stdout.trim();
  if (wanted("smollm2") && gguf && existsSync(gguf)) {
    const { loadSmolLM2 } = await import("../book/_static/runtime/smollm2.mjs");
    const { createHash } = await import("node:crypto");
    const file = readFileSync(gguf);
    const model = loadSmolLM2(file, { digest: createHash("sha256").update(file).digest("hex") });
    const tok = model.tokenizer;
    const question = "What is the capital of France?";
    const ids = tok.encode(tok.chat(question));
    const out = [];
    let last = null;
    for (const s of model.steps(ids, 32, { temperature: 0, attention: true, stopAt: tok.eosId })) {
      out.push(s.id);
      last = { tokens: [...ids, ...out].slice(s.offset, s.position + 1), attention: s.attention };
    }
    const layer = 18;
    const S = last.tokens.length;
    const cols = [0, ...Array.from({ length: 15 }, (_, i) => S - 15 + i)];
    const rows = last.attention[layer].map((w) => cols.map((c) => w[c]));
    const labels = cols.map((c) => shown(tok.decode([last.tokens[c]])));
    const reply = tok.decode(out.filter((i) => i !== tok.eosId));
    const figure = svg("SmolLM2-135M-Instruct: a chat reply, and where the heads looked",
      `You: ${question}\nSmolLM2: ${reply}`, rows, rows.map((_, i) => `head ${i}`), labels,
      `Layer ${layer} (numbered from 0): where each head (a row) looked from the reply's last token, over the first token and the last 15 (columns); colour: the weight, 0 to 1. Greedy, in the runtime, from the model's 4-bit weights.`);
    writeFileSync(`${dir}smollm2.fallback.svg`, figure);
    console.log(`smollm2: ${dir}smollm2.fallback.svg`);
  }
}
