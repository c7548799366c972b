// widget-window.mjs: chapter 19's character model writing without end in the reader's browser,
// through a sliding window with attention sinks (window.mjs), beside a chart of the memory its
// keys and values take. With a window the memory climbs while the cache fills, then stays flat
// however long the text; with full attention it grows by one row a character and the model
// meets rotary distances past the 128 it was trained on.
//
// Mounted by widgets.mjs for <div class="aft-widget" data-kind="window"> (attention_lib.widget_html),
// which imports this module only on a page that has one; the model loads as the other widgets' do.
import { streamSteps } from "./window.mjs";
import { h, loadShared, nextFrame, sized } from "./widgets.mjs";

const SHOWN_CHARS = 1500; // the output keeps the last characters only: the page stays light
const FULL_LIMIT = 4000; // full attention stops here: its cache grows without bound
const PROMPT_LIMIT = 2000;

const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;

/** The memory chart: KiB of keys and values (y) against characters written (x). */
function drawMemory(canvas, points, limitBytes) {
  const root = canvas.closest(".aft-widget");
  const cssW = Math.max(220, Math.min(480, (root ? root.clientWidth : 320) - 30));
  const cssH = 150;
  const ctx = sized(canvas, cssW, cssH);
  const left = 74;
  const bottom = cssH - 30;
  const top = 12;
  const right = cssW - 10;
  const xMax = Math.max(200, points.length ? points[points.length - 1][0] : 0);
  const yMax = Math.max(limitBytes, ...points.map((p) => p[1]), 1) * 1.1;
  const x = (v) => left + (v / xMax) * (right - left);
  const y = (v) => bottom - (v / yMax) * (bottom - top);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, cssW, cssH);
  ctx.strokeStyle = "#555";
  ctx.beginPath();
  ctx.moveTo(left, top);
  ctx.lineTo(left, bottom);
  ctx.lineTo(right, bottom);
  ctx.stroke();
  ctx.fillStyle = "#222";
  ctx.font = "12px sans-serif";
  ctx.textBaseline = "middle";
  if (points.length) {
    const yLabel = kib(yMax / 1.1);
    ctx.fillText(yLabel, left - 6 - ctx.measureText(yLabel).width, y(yMax / 1.1));
  }
  ctx.fillText("0", left - 14, bottom);
  ctx.textBaseline = "top";
  ctx.fillText("0", left - 3, bottom + 4);
  const xLabel = `${xMax.toLocaleString("en")} characters`;
  ctx.fillText(xLabel, right - ctx.measureText(xLabel).width, bottom + 4);
  ctx.fillText("memory of keys and values", left + 6, top - 10 < 0 ? 0 : top - 10);
  if (!points.length) return;
  ctx.strokeStyle = "#2f5d9b";
  ctx.lineWidth = 2;
  ctx.beginPath();
  points.forEach(([px, py], i) => (i ? ctx.lineTo(x(px), y(py)) : ctx.moveTo(x(px), y(py))));
  ctx.stroke();
}

/** The widget in `root` for the exported model `name`. */
export function mountWindow(root, name) {
  const uid = root.id || `aft-window-${Math.random().toString(36).slice(2)}`;
  const id = (s) => `${uid}-${s}`;
  const prompt = h("textarea", { id: id("prompt"), rows: 2, spellcheck: "false" });
  prompt.value = root.dataset.prompt || "ROMEO:\n";
  const mode = h("select", { id: id("mode") },
    h("option", { value: "sinks" }, "window + sinks"),
    h("option", { value: "window" }, "window alone"),
    h("option", { value: "full" }, "full attention (keep every key)"));
  const windowInput = h("input", { type: "number", id: id("window"), min: 4, max: 120, step: 1, value: 64, inputmode: "numeric" });
  const sinksInput = h("input", { type: "number", id: id("sinks"), min: 1, max: 16, step: 1, value: 4, inputmode: "numeric" });
  const temperature = h("input", { type: "range", id: id("temperature"), min: 0, max: 1.5, step: 0.05, value: 0.8 });
  const tempOut = h("output", { for: id("temperature"), class: "aft-value" }, "0.8");
  temperature.addEventListener("input", () => { tempOut.textContent = String(Number(temperature.value)); });
  const seed = h("input", { type: "number", id: id("seed"), min: 0, step: 1, value: 1, inputmode: "numeric" });
  const button = h("button", { type: "button", class: "aft-go" }, "Write");
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "The model (434 KB) loads when you first press Write.");
  const output = h("div", { class: "aft-output", role: "group", "aria-label": "The text written so far (its last characters)" });
  const canvas = h("canvas", { class: "aft-memory", role: "img", "aria-label": "Memory of keys and values: nothing written yet" });
  const field = (label, key) => {
    const dd = h("dd", { "data-key": key }, "–");
    return [h("dt", {}, label), dd];
  };
  const readout = h("dl", { class: "aft-readout" },
    field("Characters written", "written"), field("Rows of keys per layer", "rows"),
    field("Memory of keys and values", "bytes"), field("Attention on the sinks (last layer)", "sinkshare"));
  const set = (key, text) => { readout.querySelector(`[data-key="${key}"]`).textContent = text; };
  const control = (label, input, ...rest) => h("div", { class: "aft-control" }, h("label", { for: input.id }, label), input, ...rest);
  root.replaceChildren(
    h("p", { class: "aft-title" }, "Writing without end: a sliding window with attention sinks"),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: prompt.id }, "Prompt"), prompt),
    h("div", { class: "aft-controls" },
      control("Attention", mode),
      control("Window", windowInput),
      control("Sinks", sinksInput),
      control("Temperature", temperature, tempOut),
      control("Seed", seed)),
    h("div", { class: "aft-actions" }, button),
    status,
    h("div", { class: "aft-window-live" }, readout, h("div", { class: "aft-heat" }, canvas)),
    output,
  );
  mode.addEventListener("change", () => { sinksInput.disabled = mode.value !== "sinks"; windowInput.disabled = mode.value === "full"; });
  drawMemory(canvas, [], 0);

  let running = false;
  let stopRequested = false;

  const fail = (message) => {
    status.textContent = message;
    status.classList.add("aft-error");
    output.textContent = "";
    root.dataset.state = "error";
  };

  function readInt(input, label, min, max) {
    const v = Number(input.value);
    if (!(Number.isInteger(v) && v >= min && v <= max)) {
      throw new RangeError(`${label} must be a whole number from ${min} to ${max}, got "${input.value}"`);
    }
    return v;
  }

  async function write() {
    status.classList.remove("aft-error");
    let opts;
    let text = prompt.value;
    try {
      if (!text) throw new RangeError("Type a prompt first (letters, punctuation, newlines).");
      const full = mode.value === "full";
      const win = full ? null : readInt(windowInput, "Window", 4, 120);
      const sinks = mode.value === "sinks" ? readInt(sinksInput, "Sinks", 1, 16) : 0;
      opts = { window: win, sinks, temperature: Number(temperature.value), seed: readInt(seed, "Seed", 0, 2 ** 32 - 1) };
    } catch (err) {
      fail(err.message);
      return;
    }
    let model;
    try {
      status.textContent = "Loading the model…";
      model = await loadShared(name);
    } catch (err) {
      fail(`The model did not load: ${err.message}`);
      return;
    }
    const cut = text.length > PROMPT_LIMIT;
    if (cut) text = text.slice(-PROMPT_LIMIT);
    let ids;
    try {
      ids = model.tokenizer.encode(text);
    } catch (err) {
      fail(`${err.message}. This model knows only the letters, punctuation and newlines of the play.`);
      return;
    }
    running = true;
    stopRequested = false;
    button.textContent = "Stop";
    root.dataset.state = "running";
    const limit = opts.window === null ? FULL_LIMIT : Infinity;
    // between steps a full cache holds sinks + window - 1 rows per layer (the next query makes the window)
    const steady = opts.window === null ? 0 : model.config.n_layers * 2 * (opts.sinks + opts.window - 1) * model.config.d_model * 4;
    const points = [];
    let shown = text;
    let written = 0;
    let last = null;
    let peak = 0;
    const what = opts.window === null ? "full attention"
      : `a window of ${opts.window}${opts.sinks ? ` and ${opts.sinks} sinks` : ", no sinks"}`;
    status.textContent = `Writing with ${what}${cut ? ` (the prompt was cut to its last ${PROMPT_LIMIT} characters)` : ""}. Press Stop to end.`;
    try {
      const steps = streamSteps(model, ids, limit, { ...opts, attention: opts.sinks > 0 });
      let batch = [];
      for (const s of steps) {
        batch.push(model.tokenizer.piece(s.id));
        written += 1;
        last = s;
        peak = Math.max(peak, s.bytes);
        if (written % 4 === 0) points.push([written, s.bytes]);
        if (batch.length >= 8) {
          shown = (shown + batch.join("")).slice(-SHOWN_CHARS);
          batch = [];
          output.textContent = shown;
          set("written", `${written.toLocaleString("en")} (position ${(ids.length + written - 1).toLocaleString("en")}; trained on 128)`);
          set("rows", `${s.rows}`);
          set("bytes", `${kib(s.bytes)} now, ${kib(peak)} at most`);
          if (opts.sinks > 0 && s.attention) {
            const lastLayer = s.attention[s.attention.length - 1];
            const share = lastLayer.reduce((sum, w) => sum + w.slice(0, opts.sinks).reduce((a, b) => a + b, 0), 0) / lastLayer.length;
            set("sinkshare", `${(100 * share).toFixed(1)}%`);
          } else set("sinkshare", "no sinks");
          root.dataset.position = String(ids.length + written - 1);
          root.dataset.bytes = String(s.bytes);
          root.dataset.bytesMax = String(peak);
          if (written % 64 === 0) {
            drawMemory(canvas, points, steady);
            canvas.setAttribute("aria-label", `Memory of keys and values against characters written: ${kib(s.bytes)} ` +
              `after ${written.toLocaleString("en")} characters, ${kib(peak)} at most` +
              (opts.window === null ? ", growing by one row of keys and values a character" : ", flat once the window is full"));
          }
          await nextFrame();
          if (stopRequested) break;
        }
      }
      shown = (shown + batch.join("")).slice(-SHOWN_CHARS);
      output.textContent = shown;
      drawMemory(canvas, points, steady);
      status.textContent = stopRequested
        ? `Stopped after ${written.toLocaleString("en")} characters; the memory of keys and values ended at ${kib(last ? last.bytes : 0)}.`
        : `Full attention stops after ${FULL_LIMIT.toLocaleString("en")} characters: its cache has grown to ${kib(peak)}, and ` +
          "its rotary distances run far past the 128 it was trained on. A window keeps both bounded.";
      root.dataset.state = "done";
    } catch (err) {
      fail(`Something went wrong: ${err.message}`);
    } finally {
      running = false;
      button.textContent = "Write";
    }
  }

  button.addEventListener("click", () => {
    if (running) stopRequested = true;
    else write();
  });
  root.classList.add("aft-live");
}
