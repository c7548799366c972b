// The static figures the training widgets show without JavaScript (and before their script
// runs): what the widget itself shows after training, drawn from a run of the same code in
// node, deterministic (fixed seeds).
//
//   - book/_static/fallbacks/train-induction.fallback.svg: chapter 9's model trained on the
//     copy task (the widget's run): the loss curve and both layers' attention maps on a
//     held-out sequence, the cells each head should find outlined;
//   - book/_static/fallbacks/train-text.fallback.svg: the "small" preset trained for 300 steps
//     on Tiny Shakespeare: training and held-out loss, and a sample of what it writes.
//
//   node scripts/make_train_fallbacks.mjs          (about 20 s of one core)
//
// tests/js/train-fallbacks.test.mjs draws both again and compares them with the committed
// files: a change to the training code that moves the figures fails it until this is re-run.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createSession } from "../book/_static/runtime/train-worker.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const out = `${root}book/_static/fallbacks/`;
const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Run a session to its end; returns its messages. */
function run(start, after = []) {
  const messages = [];
  const queue = [];
  const session = createSession((m) => messages.push(m), (f) => queue.push(f));
  session.handle(start);
  while (queue.length) queue.shift()();
  for (const m of after) session.handle(m);
  const error = messages.find((m) => m.type === "error");
  if (error) throw new Error(error.message);
  return messages;
}

/** A polyline chart of series {colour: [[step, loss]]} in a box at (x, y) of w x h. */
function chart(series, x, y, w, h, label) {
  const pts = Object.values(series).flat();
  const maxStep = Math.max(...pts.map((p) => p[0]));
  const hi = Math.max(...pts.map((p) => p[1]));
  const px = (s) => x + (w * s) / maxStep;
  const py = (v) => y + h * (1 - v / hi);
  let svg = `<path d="M${x},${y}V${y + h}H${x + w}" stroke="#999" fill="none"/>`;
  svg += `<text x="${x - 4}" y="${y + 10}" text-anchor="end">${hi.toFixed(1)}</text><text x="${x - 4}" y="${y + h}" text-anchor="end">0</text>`;
  svg += `<text x="${x + w}" y="${y + h + 16}" text-anchor="end">step ${maxStep}</text><text x="${x}" y="${y - 6}">${esc(label)}</text>`;
  for (const [colour, p] of Object.entries(series)) {
    svg += `<polyline fill="none" stroke="${colour}" stroke-width="1.5" points="${p.map(([s, v]) => `${px(s).toFixed(1)},${py(v).toFixed(1)}`).join(" ")}"/>`;
  }
  return svg;
}

function heat(map, T, x, y, size, title, marks) {
  const cell = size / T;
  let svg = `<text x="${x}" y="${y - 6}">${esc(title)}</text>`;
  for (let r = 0; r < T; r++) {
    for (let c = 0; c < T; c++) {
      const w = Math.max(0, Math.min(1, map[r * T + c]));
      if (w < 0.02) continue;
      svg += `<rect x="${(x + c * cell).toFixed(1)}" y="${(y + r * cell).toFixed(1)}" width="${cell.toFixed(2)}" height="${cell.toFixed(2)}" fill="rgb(${Math.round(255 * (1 - w))},${Math.round(255 - 140 * w)},255)"/>`;
    }
  }
  svg += `<rect x="${x}" y="${y}" width="${size}" height="${size}" fill="none" stroke="#999"/>`;
  for (const [r, c] of marks) svg += `<rect x="${(x + c * cell + 0.5).toFixed(1)}" y="${(y + r * cell + 0.5).toFixed(1)}" width="${(cell - 1).toFixed(2)}" height="${(cell - 1).toFixed(2)}" fill="none" stroke="#d55e00"/>`;
  return svg;
}

// Drawn 400 units wide with 12-unit text: a phone's column (about 300 CSS px at 390 px) shows the
// text at 9 px, readable without enlarging (scripts/browser_check.py asks for 8).
const WIDTH = 400;

/** The lines of ``text`` (its own line breaks kept), each cut to at most ``n`` characters at a space. */
function wrap(text, n) {
  const out = [];
  for (const line of text.split("\n")) {
    let rest = line;
    while (rest.length > n) {
      const cut = rest.lastIndexOf(" ", n) > 0 ? rest.lastIndexOf(" ", n) : n;
      out.push(rest.slice(0, cut));
      rest = rest.slice(cut).trimStart();
    }
    out.push(rest);
  }
  return out;
}

function svgDoc(w, h, title, desc, body) {
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-labelledby="t d" font-family="sans-serif" font-size="12">` +
    `<title id="t">${esc(title)}</title><desc id="d">${esc(desc)}</desc><rect width="${w}" height="${h}" fill="#fff"/>${body}</svg>\n`;
}

/** Chapter 9's figure: the induction head forming. Returns ``{ name, svg, desc }``. */
export function inductionFigure() {
  const msgs = run({ type: "start", task: "induction", every: 10 });
  const progress = msgs.filter((m) => m.type === "progress");
  const last = progress.at(-1);
  const formed = progress.find((m) => m.scores.accuracy >= 0.9);
  const [a, m] = last.segment;
  const T = 24;
  const prev = Array.from({ length: T - 1 }, (_, i) => [i + 1, i]);
  const ind = [];
  for (let i = a + m; i < a + 2 * m - 1; i++) ind.push([i, i - m + 1]);
  const s = last.scores;
  const desc = `The loss of chapter 9's two-layer model on the copy task falls from ${progress[0].loss.toFixed(2)} to ` +
    `${last.loss.toFixed(3)} in ${last.step} steps, with a sudden drop near step ${formed ? formed.step : "?"}. ` +
    `Layer 0 puts ${Math.round(100 * s.previous)}% of its weight on the previous position; layer 1, inside the repeat, ` +
    `${Math.round(100 * s.induction)}% on the position after the earlier occurrence.`;
  const body = chart({ "#0072B2": progress.map((p) => [p.step, p.loss]) }, 40, 30, 340, 110, "training loss (nats)") +
    heat(last.maps[0], T, 20, 200, 170, "layer 0: previous token", prev) +
    heat(last.maps[1], T, 210, 200, 170, "layer 1: induction", ind) +
    `<text x="20" y="395">After ${last.step} steps: held-out accuracy ${Math.round(100 * s.accuracy)}%</text>` +
    `<text x="20" y="413">on the predictable tokens.</text>`;
  const svg = svgDoc(WIDTH, 425, "An induction head forming: the loss and both layers' attention maps", desc, body);
  return { name: "train-induction.fallback.svg", svg, desc };
}

/** Chapter 11's figure: a model of a text (Tiny Shakespeare, the small preset). ``{ name, svg, desc }``. */
export function textFigure() {
  const text = readFileSync(`${root}data/shakespeare/input.txt`, "utf8");
  const msgs = run({ type: "start", task: "text", text, preset: "small", steps: 300, every: 25 },
    [{ type: "generate", prompt: "ROMEO:", n: 160, temperature: 0.8, seed: 1 }]);
  const progress = msgs.filter((m) => m.type === "progress");
  const sample = msgs.find((m) => m.type === "generated").text;
  const last = progress.at(-1);
  const desc = `The small model trained on Tiny Shakespeare for ${last.step} steps: training loss ${last.loss.toFixed(2)}, ` +
    `held-out loss ${last.heldOut.toFixed(2)} nats per character. It then writes: ${sample}`;
  const lines = wrap(sample, 46).slice(0, 8);
  const body = chart({ "#0072B2": progress.map((p) => [p.step, p.loss]), "#D55E00": progress.map((p) => [p.step, p.heldOut]) },
    40, 46, 340, 110, "training (blue), held-out (orange)") +
    `<text x="40" y="22">loss (nats per character):</text>` +
    `<text x="20" y="196">After ${last.step} steps, held-out ${last.heldOut.toFixed(2)} nats per</text>` +
    `<text x="20" y="214">character; it writes:</text>` +
    lines.map((l, i) => `<text x="20" y="${238 + 18 * i}" font-family="monospace">${esc(l)}</text>`).join("");
  const svg = svgDoc(WIDTH, 238 + 18 * lines.length, "A model of a text trained in the page: its loss and what it writes", desc, body);
  return { name: "train-text.fallback.svg", svg, desc };
}

/** The folder the figures are written to (and tests/js/train-fallbacks.test.mjs reads). */
export const FALLBACKS = out;

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const draw of [inductionFigure, textFigure]) {
    const { name, svg, desc } = draw();
    writeFileSync(`${out}${name}`, svg);
    console.log(desc);
  }
}
