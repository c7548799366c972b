// widget-train.mjs: the training widgets, a model trained live in the reader's page.
//
//   <div class="aft-widget" data-train="induction">  chapter 9: watch an induction head form
//   <div class="aft-widget" data-train="text">       chapter 11: a model of your own text
//
// The steps run in a Web Worker (train-worker.mjs), so the page stays responsive; this
// module draws what the worker reports: the loss curve, and for the induction task the
// attention maps of both layers on one held-out sequence, with the cells each head should
// find marked; once training is paused or done, switches turn either head off (the worker
// runs the model through transformer.mjs with that head's output zero) and say how much of
// the repeat the model still copies. Nothing is fetched but this site's own modules. widgets.mjs's mountAll()
// mounts these widgets too (it imports this module on a page that has one).
import { PRESETS } from "./train-tasks.mjs";
import { FINETUNE } from "./train-finetune.mjs";
import { MAX_CHARS, checkLearningRate, checkText } from "./train-worker.mjs";
import { h } from "./widgets.mjs";

const WORKERS = new Set(); // every worker of the page, ended when the page goes away
globalThis.addEventListener?.("pagehide", () => {
  for (const w of WORKERS) w.terminate();
  WORKERS.clear();
});

/** A worker for one run; onMessage receives its messages. */
function startWorker(onMessage, onError) {
  const worker = new Worker(new URL("./train-worker.mjs", import.meta.url), { type: "module" });
  WORKERS.add(worker);
  worker.onmessage = (event) => onMessage(event.data);
  worker.onerror = (event) => {
    event.preventDefault();
    onError(event.message || "the training worker failed to start");
  };
  return {
    post: (msg) => worker.postMessage(msg),
    end: () => {
      worker.terminate();
      WORKERS.delete(worker);
    },
  };
}

/**
 * onMessage, timed: the longest main-thread time any message took is kept in
 * root.dataset.mainMs (the browser check reads it: the widget's own share of a frame).
 */
function timed(root, onMessage) {
  return (msg) => {
    const t0 = performance.now();
    onMessage(msg);
    const ms = performance.now() - t0;
    if (ms > Number(root.dataset.mainMs || 0)) root.dataset.mainMs = ms.toFixed(1);
  };
}

/** A canvas sized to its box's width (CSS px), drawn at the screen's pixel density. */
function fit(canvas, cssWidth, cssHeight) {
  const ratio = Math.min(globalThis.devicePixelRatio || 1, 3);
  canvas.style.width = `${cssWidth}px`;
  canvas.style.height = `${cssHeight}px`;
  canvas.width = Math.round(cssWidth * ratio);
  canvas.height = Math.round(cssHeight * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}

const COLOURS = { train: "#0072B2", heldOut: "#D55E00", shakespeare: "#009E73" };
/** The legend's words (finetuning's three lines: both held-out texts named), and the dashes
 * that tell the lines apart in greyscale. */
const LABELS = { train: "training", heldOut: "held-out", shakespeare: "Shakespeare" };
const LABELS3 = { train: "training", heldOut: "your text", shakespeare: "Shakespeare" };
const DASHES = { shakespeare: [5, 3] };

/**
 * The loss curves: series {name: [[step, loss], ...]}, only finite points drawn (a NaN
 * is never a line), log-scaled when the losses span more than a factor 10.
 */
function drawCurve(canvas, series, width, { floor = null, floorLabel = "", zero = true } = {}) {
  // three series: the legend gets a row of its own under the axis's labels
  const row = Object.keys(series).length > 2 ? 14 : 0;
  const H = 170 + row;
  const ctx = fit(canvas, width, H);
  const pad = { l: 40, r: 8, t: 8, b: 26 + row };
  const points = Object.values(series).flat().filter(([s, v]) => Number.isFinite(v) && v > 0);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, width, H);
  ctx.font = "11px sans-serif";
  ctx.fillStyle = "#333";
  if (!points.length) {
    ctx.fillText("The loss appears here as it falls.", pad.l, H / 2);
    return;
  }
  const maxStep = Math.max(...points.map((p) => p[0]), 10);
  let lo = Math.min(...points.map((p) => p[1]));
  let hi = Math.max(...points.map((p) => p[1]), floor ?? 0);
  const log = hi / lo > 10;
  const f = log ? Math.log : (v) => v;
  if (!log && zero) lo = 0;
  else if (!log) [lo, hi] = [lo - 0.05 * (hi - lo || 1), hi + 0.05 * (hi - lo || 1)]; // a finetuning's small moves, visible
  const x = (s) => pad.l + ((width - pad.l - pad.r) * s) / maxStep;
  const y = (v) => pad.t + (H - pad.t - pad.b) * (1 - (f(v) - f(lo)) / (f(hi) - f(lo) || 1));
  ctx.strokeStyle = "#999";
  ctx.beginPath();
  ctx.moveTo(pad.l, pad.t);
  ctx.lineTo(pad.l, H - pad.b);
  ctx.lineTo(width - pad.r, H - pad.b);
  ctx.stroke();
  ctx.fillText(`step ${maxStep}`, width - pad.r - 60, H - 8 - row);
  ctx.fillText("0", pad.l - 4, H - 8 - row);
  ctx.fillText(hi.toFixed(2), 2, pad.t + 8);
  ctx.fillText(lo.toFixed(2), 2, H - pad.b);
  ctx.save();
  ctx.translate(10, H / 2 + 30);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText(log ? "loss (log scale)" : "loss (nats)", 0, 0);
  ctx.restore();
  if (floor !== null) {
    ctx.setLineDash([3, 3]);
    ctx.strokeStyle = "#777";
    ctx.beginPath();
    ctx.moveTo(pad.l, y(floor));
    ctx.lineTo(width - pad.r, y(floor));
    ctx.stroke();
    ctx.setLineDash([]);
    // above the line, or below it when the line is the chart's top (the loss starts at guessing)
    const labelY = y(floor) - 3 < pad.t + 11 ? y(floor) + 13 : y(floor) - 3;
    ctx.fillText(floorLabel, width - pad.r - ctx.measureText(floorLabel).width, labelY);
  }
  let legend = row ? 0 : pad.l + 6;
  for (const [name, pts] of Object.entries(series)) {
    ctx.strokeStyle = COLOURS[name] || "#000";
    ctx.lineWidth = 1.5;
    ctx.setLineDash(DASHES[name] ?? []);
    ctx.beginPath();
    let drawing = false;
    for (const [s, v] of pts) {
      if (!(Number.isFinite(v) && v > 0)) {
        drawing = false;
        continue;
      }
      if (drawing) ctx.lineTo(x(s), y(v));
      else ctx.moveTo(x(s), y(v));
      drawing = true;
    }
    ctx.stroke();
    if (Object.keys(series).length > 1) {
      const label = (row ? LABELS3 : LABELS)[name] ?? name;
      // under the axis, between "0" and "step n" (or on a row of its own): never over the curves
      ctx.beginPath();
      ctx.moveTo(legend + 12, H - 11);
      ctx.lineTo(legend + 26, H - 11);
      ctx.stroke();
      ctx.fillStyle = "#333";
      ctx.fillText(label, legend + 30, H - 8);
      legend += 26 + ctx.measureText(label).width;
    }
    ctx.setLineDash([]);
    ctx.lineWidth = 1;
  }
}

/** A (T, T) attention map in shades of blue, weight 0 to 1, with `marks` [[row, col]] outlined. */
function drawMap(canvas, map, T, size, title, marks) {
  const top = 16;
  const ctx = fit(canvas, size, size + top);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, size, size + top);
  ctx.fillStyle = "#333";
  ctx.font = "11px sans-serif";
  ctx.fillText(title, 0, 11);
  const cell = size / T;
  // one pixel per cell, scaled up without smoothing: a few hundred fillRect calls with a
  // colour string each cost more main-thread time than a frame has
  const small = typeof OffscreenCanvas !== "undefined" ? new OffscreenCanvas(T, T)
    : Object.assign(document.createElement("canvas"), { width: T, height: T });
  const image = new ImageData(T, T);
  for (let i = 0; i < T * T; i++) {
    const w = Math.max(0, Math.min(1, map[i]));
    image.data[4 * i] = Math.round(255 * (1 - w));
    image.data[4 * i + 1] = Math.round(255 - 140 * w);
    image.data[4 * i + 2] = 255;
    image.data[4 * i + 3] = 255;
  }
  small.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, 0, top, size, size);
  ctx.strokeStyle = "#d55e00";
  ctx.lineWidth = 1;
  for (const [r, c] of marks) ctx.strokeRect(c * cell + 0.5, top + r * cell + 0.5, cell - 1, cell - 1);
}

const pct = (v) => `${Math.round(100 * v)}%`;

/** Chapter 9: train the two-layer model on the copy task, and watch the heads form. */
function mountInduction(root) {
  const id = (s) => `${root.id}-${s}`;
  const train = h("button", { type: "button", class: "aft-go", id: id("train") }, "Train");
  const stop = h("button", { type: "button", id: id("stop"), disabled: true }, "Stop");
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "Press Train: the two-layer model of this chapter trains here, in your browser (about a minute).");
  const curve = h("canvas", { class: "aft-curve", role: "img", "aria-label": "Training loss: no steps yet" });
  const map0 = h("canvas", { class: "aft-map", role: "img", "aria-label": "Layer 0's attention: not trained yet" });
  const map1 = h("canvas", { class: "aft-map", role: "img", "aria-label": "Layer 1's attention: not trained yet" });
  const scores = h("p", { class: "aft-heat-text", "aria-live": "off" },
    "Outlined cells: where a previous-token head (layer 0) and an induction head (layer 1) would look.");
  // head switches: the model as it is now, run by the book's runtime with heads switched off
  // (their outputs zero before W_O) on the 64 held-out sequences (the worker's "ablate")
  const heads = [0, 1].map((layer) => h("input", { type: "checkbox", id: id(`off-${layer}`), "data-layer": layer, disabled: true }));
  const switchText = h("p", { class: "aft-help", id: id("switch-help") },
    "Pause the training (or let it finish), then switch a head off: the model runs without it on the held-out sequences.");
  const ablated = h("p", { class: "aft-heat-text", role: "status", "aria-live": "polite" });
  const switchBox = h("fieldset", { class: "aft-switches", "aria-describedby": id("switch-help") },
    h("legend", {}, "Switch heads off"),
    h("div", { class: "aft-switch-row" },
      h("label", { class: "aft-switch", for: id("off-0") }, heads[0], "layer 0, head 0 (the previous-token head)")),
    h("div", { class: "aft-switch-row" },
      h("label", { class: "aft-switch", for: id("off-1") }, heads[1], "layer 1, head 0 (the induction head)")),
    switchText, ablated);
  root.replaceChildren(
    h("p", { class: "aft-title" }, "Watch an induction head form"),
    h("div", { class: "aft-actions" }, train, " ", stop),
    status, curve,
    h("div", { class: "aft-maps" }, map0, map1),
    scores,
    switchBox,
  );
  let worker = null;
  let state = "idle"; // idle | running | paused | done
  let points = [];
  let last = null;
  // the box's width as the ResizeObserver last saw it: reading clientWidth inside a
  // message handler would force a layout of the page (with a 1 MB textarea: 200 ms)
  let boxWidth = 640;
  const width = () => Math.max(240, Math.min(boxWidth, 640));
  function redraw() {
    const w = width();
    drawCurve(curve, { train: points }, w, { floor: Math.log(32), floorLabel: "guessing: log 32" });
    if (!last) return;
    const T = 24;
    const size = Math.min(220, Math.floor((w - 16) / 2));
    const [a, m] = last.segment;
    const prev = Array.from({ length: T - 1 }, (_, i) => [i + 1, i]);
    const ind = [];
    for (let i = a + m; i < a + 2 * m - 1; i++) ind.push([i, i - m + 1]);
    drawMap(map0, last.maps[0], T, size, "layer 0", prev);
    drawMap(map1, last.maps[1], T, size, "layer 1", ind);
  }
  const offHeads = () => heads.filter((c) => c.checked).map((c) => [Number(c.dataset.layer), 0]);
  function setState(next) {
    state = next;
    train.textContent = { idle: "Train", running: "Pause", paused: "Resume", done: "Train again" }[state];
    stop.disabled = !(state === "running" || state === "paused");
    root.dataset.state = state;
    // the switches act on the model as it stands: while it is paused or finished
    const still = (state === "paused" || state === "done") && worker && last;
    for (const c of heads) c.disabled = !still;
    if (!worker) for (const c of heads) c.checked = false;
    delete root.dataset.ablatedAccuracy;
    if (still && offHeads().length) ablate();
    else if (state === "running" && offHeads().length) ablated.textContent = "Training goes on: pause it to see the switched-off heads' effect on the newer weights.";
    else ablated.textContent = "";
  }
  function ablate() {
    if (!worker) return;
    root.dataset.ablating = "";
    worker.post({ type: "ablate", heads: offHeads() });
  }
  for (const c of heads) c.addEventListener("change", ablate);
  /** What the model copies with the switched-off heads, against every head on. */
  function showAblated(msg) {
    delete root.dataset.ablating;
    const names = msg.heads.map(([l]) => (l === 0 ? "the previous-token head (layer 0)" : "the induction head (layer 1)"));
    const [a, m] = msg.segment;
    const marks = [];
    for (let i = a + m; i < a + 2 * m - 1; i++) {
      const want = msg.targets[i];
      marks.push(msg.guesses[i] === want ? `${want} ✓` : `${want} ✗ (guessed ${msg.guesses[i]})`);
    }
    const what = names.length ? `With ${names.join(" and ")} switched off` : "With both heads on";
    ablated.textContent = `${what}, the model guesses ${pct(msg.accuracy)} of the predictable tokens of the ` +
      `64 held-out sequences (${pct(msg.baseline)} with both heads on, step ${msg.step}). In the first one the ` +
      `repeat continues ${marks.join(", ")}.`;
    root.dataset.ablatedAccuracy = msg.accuracy.toFixed(4);
    root.dataset.baselineAccuracy = msg.baseline.toFixed(4);
    root.dataset.ablatedHeads = msg.heads.map(([l, hh]) => `${l}.${hh}`).join(" ");
  }
  function onMessage(msg) {
    if (msg.type === "ablated") {
      if (state === "paused" || state === "done") showAblated(msg);
    } else if (msg.type === "progress") {
      points.push([msg.step, msg.loss]);
      last = msg;
      const s = msg.scores;
      status.textContent = `Step ${msg.step}: loss ${msg.loss.toFixed(3)} (${msg.seconds.toFixed(0)} s, ${msg.msPerStep.toFixed(0)} ms a step).`;
      scores.textContent = `On 64 held-out sequences: layer 0 puts ${pct(s.previous)} of its weight on the previous position; ` +
        `layer 1, inside the repeat, ${pct(s.induction)} on the position after the earlier occurrence; ` +
        `the model predicts ${pct(s.accuracy)} of the predictable tokens.` +
        (s.accuracy >= 0.9 && !root.dataset.formed ? " The induction head has formed." : "");
      if (s.accuracy >= 0.9 && !root.dataset.formed) root.dataset.formed = String(msg.seconds.toFixed(1));
      curve.setAttribute("aria-label", `Training loss: ${msg.loss.toFixed(3)} at step ${msg.step}, from ${points[0][1].toFixed(2)}`);
      map0.setAttribute("aria-label", `Layer 0's attention on a held-out sequence: ${pct(s.previous)} of its weight on the previous position`);
      map1.setAttribute("aria-label", `Layer 1's attention on a held-out sequence: ${pct(s.induction)} on the position after the earlier occurrence`);
      root.dataset.step = String(msg.step);
      root.dataset.loss = msg.loss.toFixed(4);
      if (!root.dataset.lossFirst) root.dataset.lossFirst = msg.loss.toFixed(4);
      redraw();
    } else if (msg.type === "done") {
      setState("done");
      status.textContent += " Done.";
    } else if (msg.type === "error") {
      if (!msg.fatal && root.dataset.ablating !== undefined) {
        delete root.dataset.ablating;
        ablated.textContent = msg.message;
        return;
      }
      fail(msg.message);
    }
  }
  function fail(message) {
    status.textContent = `Training stopped: ${message}`;
    status.classList.add("aft-error");
    if (worker) worker.end();
    worker = null;
    setState("idle");
  }
  train.addEventListener("click", () => {
    if (state === "running") {
      worker.post({ type: "pause" });
      setState("paused");
      status.textContent = `Paused at step ${last ? last.step : 0}.`;
    } else if (state === "paused") {
      worker.post({ type: "resume" });
      setState("running");
    } else {
      status.classList.remove("aft-error");
      if (typeof Worker === "undefined") return fail("this browser cannot run a Web Worker.");
      if (worker) worker.end();
      points = [];
      last = null;
      for (const c of heads) c.checked = false;
      delete root.dataset.formed;
      delete root.dataset.lossFirst;
      worker = startWorker(timed(root, onMessage), fail);
      worker.post({ type: "start", task: "induction" });
      setState("running");
      status.textContent = "Training…";
    }
  });
  stop.addEventListener("click", () => {
    if (worker) worker.end(); // ends the step under way too: nothing is left half-done
    worker = null;
    setState("idle");
    status.textContent = `Stopped at step ${last ? last.step : 0}. Train starts again from new weights.`;
  });
  redraw();
  new ResizeObserver((entries) => {
    boxWidth = Math.floor(entries[0].contentRect.width);
    redraw();
  }).observe(root);
}

/** Chapter 11: a character model of the reader's own text. */
function mountText(root) {
  const id = (s) => `${root.id}-${s}`;
  const text = h("textarea", { id: id("text"), rows: 6, spellcheck: "false",
    placeholder: "Paste any text here (up to about 1 MB), or choose a file below." });
  const file = h("input", { type: "file", id: id("file"), accept: ".txt,text/plain" });
  const preset = h("select", { id: id("preset") },
    Object.entries(PRESETS).map(([k, p]) => h("option", { value: k, selected: k === "small" }, p.label)));
  const source = h("select", { id: id("source") },
    h("option", { value: "scratch", selected: true }, "a new model, from scratch"),
    h("option", { value: "full" }, "chapter 11's model: full finetuning"),
    FINETUNE.ranks.map((r) => h("option", { value: `lora-${r}` }, `chapter 11's model: LoRA rank ${r}`)));
  const lr = h("input", { type: "text", id: id("lr"), inputmode: "decimal", value: "" , placeholder: "the preset's", size: 8 });
  const train = h("button", { type: "button", class: "aft-go", id: id("train") }, "Train");
  const stop = h("button", { type: "button", id: id("stop"), disabled: true }, "Stop");
  const generate = h("button", { type: "button", id: id("generate"), disabled: true }, "Generate");
  const download = h("button", { type: "button", id: id("download"), disabled: true }, "Download the model");
  const prompt = h("input", { type: "text", id: id("prompt"), value: "", size: 20 });
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    "Paste a text and press Train: a character model learns it here, in your browser (or, chosen under Train, " +
    "chapter 11's model is finetuned on it). Nothing is sent anywhere.");
  const curve = h("canvas", { class: "aft-curve", role: "img", "aria-label": "Loss: no steps yet" });
  const output = h("div", { class: "aft-output", role: "status", "aria-live": "polite", "aria-label": "Generated text" });
  // finetuning: what learns, and the two held-out losses side by side (before, and now)
  const info = h("p", { class: "aft-help", hidden: true });
  const compare = h("table", { class: "aft-compare", hidden: true });
  root.replaceChildren(
    h("p", { class: "aft-title" }, "A model of your own text"),
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("text") }, "Your text"), text),
    h("div", { class: "aft-controls" },
      h("div", { class: "aft-control" }, h("label", { for: id("file") }, "Or a text file"), file),
      h("div", { class: "aft-control" }, h("label", { for: id("source") }, "Train"), source),
      h("div", { class: "aft-control" }, h("label", { for: id("preset") }, "Model size"), preset)),
    h("details", { class: "aft-advanced" }, h("summary", {}, "Advanced"),
      h("div", { class: "aft-control" }, h("label", { for: id("lr") }, "Learning rate"), lr,
        h("span", { class: "aft-help" }, "above 0, at most 0.1; empty: the preset's"))),
    h("div", { class: "aft-actions" }, train, " ", stop),
    status, curve, info, compare,
    h("div", { class: "aft-controls" },
      h("div", { class: "aft-control" }, h("label", { for: id("prompt") }, "Start the text with"), prompt),
      h("div", { class: "aft-control" }, generate, " ", download)),
    output,
  );
  let worker = null;
  let state = "idle";
  let trainPts = [], heldPts = [], shakPts = [];
  let trained = false;
  let mode = "scratch"; // of the run under way: scratch, full or lora
  let before = null; // the untuned model's held-out losses (finetuning)
  // the box's width as the ResizeObserver last saw it: reading clientWidth inside a
  // message handler would force a layout of the page (with a 1 MB textarea: 200 ms)
  let boxWidth = 640;
  const width = () => Math.max(240, Math.min(boxWidth, 640));
  const redraw = () => drawCurve(curve, mode === "scratch" ? { train: trainPts, heldOut: heldPts }
    : { train: trainPts, heldOut: heldPts, shakespeare: shakPts }, width(), { zero: mode === "scratch" });
  const finetuning = () => source.value !== "scratch";
  function sourceChanged() {
    preset.disabled = state !== "idle" || finetuning();
    lr.placeholder = !finetuning() ? "the preset's" : String(FINETUNE.lr[source.value === "full" ? "full" : "lora"]);
  }
  source.addEventListener("change", sourceChanged);
  function table(step, now) {
    const f = (v) => (Number.isFinite(v) ? v.toFixed(3) : "");
    const rows = [["before finetuning", before.heldOut, before.shakespeare]];
    if (now) rows.push([`after ${step} steps`, now.heldOut, now.shakespeare]);
    compare.replaceChildren(
      h("caption", {}, "Held-out loss, nats per character (lower is better)"),
      h("thead", {}, h("tr", {}, h("td", {}), h("th", { scope: "col" }, "your text"), h("th", { scope: "col" }, "Shakespeare"))),
      h("tbody", {}, rows.map(([name, a, b]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, f(a)), h("td", {}, f(b))))));
    compare.hidden = false;
  }
  function setState(next) {
    state = next;
    train.textContent = { idle: "Train", running: "Pause", paused: "Resume" }[state];
    stop.disabled = !(state === "running" || state === "paused");
    text.disabled = preset.disabled = file.disabled = lr.disabled = source.disabled = state !== "idle";
    if (state === "idle" && finetuning()) preset.disabled = true;
    generate.disabled = download.disabled = !trained;
    root.dataset.state = state;
  }
  function say(message, error = false) {
    status.textContent = message;
    status.classList.toggle("aft-error", error);
  }
  function fail(message) {
    say(message, true);
    if (state !== "idle" && worker) {
      worker.post({ type: "pause" });
      setState("paused");
      train.textContent = "Resume";
    }
  }
  function onMessage(msg) {
    if (msg.type === "ready" && msg.task === "finetune") {
      before = msg.before;
      const share = (100 * msg.trainable) / msg.params;
      info.textContent = msg.mode === "lora"
        ? `LoRA rank ${msg.rank} (scaling ${msg.scaling}): ${msg.trainable.toLocaleString("en")} trainable parameters of ${msg.params.toLocaleString("en")} ` +
          `(${share.toFixed(1)}%), A and B beside the query and value projections of every block; the rest frozen.`
        : `Full finetuning: all ${msg.params.toLocaleString("en")} parameters of chapter 11's model train.`;
      info.hidden = false;
      const left = msg.dropped.count ? ` ${msg.dropped.count.toLocaleString("en")} characters outside Shakespeare's ${msg.vocab} were left out ` +
        `(${msg.dropped.examples.join(" ")}).` : "";
      say(`Chapter 11's model, ${msg.steps} steps: ${msg.train.toLocaleString("en")} characters of your text to train on, ` +
        `the last ${msg.heldOut.toLocaleString("en")} held out.${left}`);
      heldPts.push([0, before.heldOut]);
      shakPts.push([0, before.shakespeare]);
      table(0, null);
      root.dataset.trainable = String(msg.trainable);
      root.dataset.shakespeareFirst = before.shakespeare.toFixed(4);
      root.dataset.heldOutFirst = before.heldOut.toFixed(4);
      redraw();
    } else if (msg.type === "ready") {
      say(`A model of ${msg.params.toLocaleString("en")} parameters, ${msg.vocab} distinct characters; ` +
        `${msg.train.toLocaleString("en")} characters to train on, the last ${msg.heldOut.toLocaleString("en")} held out.`);
    } else if (msg.type === "progress") {
      trainPts.push([msg.step, msg.loss]);
      if (Number.isFinite(msg.heldOut)) heldPts.push([msg.step, msg.heldOut]);
      trained = true;
      if (state === "running") generate.disabled = download.disabled = false;
      if (Number.isFinite(msg.shakespeare)) {
        shakPts.push([msg.step, msg.shakespeare]);
        table(msg.step, msg);
        root.dataset.shakespeare = msg.shakespeare.toFixed(4);
        say(`Step ${msg.step}: held-out loss ${msg.heldOut.toFixed(3)} on your text, ${msg.shakespeare.toFixed(3)} on Shakespeare ` +
          `(${msg.seconds.toFixed(0)} s, ${msg.msPerStep.toFixed(0)} ms a step).`);
        curve.setAttribute("aria-label", `Loss at step ${msg.step}: training ${msg.loss.toFixed(2)}; held out, your text ${msg.heldOut.toFixed(2)} ` +
          `(from ${before.heldOut.toFixed(2)}) and Shakespeare ${msg.shakespeare.toFixed(2)} (from ${before.shakespeare.toFixed(2)}) nats per character`);
      } else {
        say(`Step ${msg.step}: training loss ${msg.loss.toFixed(3)}, held-out ${msg.heldOut.toFixed(3)} nats per character ` +
          `(${msg.seconds.toFixed(0)} s, ${msg.msPerStep.toFixed(0)} ms a step).`);
        curve.setAttribute("aria-label", `Loss: training ${msg.loss.toFixed(2)}, held-out ${msg.heldOut.toFixed(2)} nats per character at step ${msg.step}`);
      }
      root.dataset.step = String(msg.step);
      root.dataset.heldOut = msg.heldOut.toFixed(4);
      if (!root.dataset.heldOutFirst) root.dataset.heldOutFirst = msg.heldOut.toFixed(4);
      redraw();
    } else if (msg.type === "done") {
      setState("idle");
      say(mode === "scratch" ? `Done: ${msg.step} steps. Generate and Download use the model as it is.`
        : `Done: ${msg.step} steps. Generate and Download use the finetuned model; Train starts again from chapter 11's.`);
    } else if (msg.type === "generated") {
      output.textContent = msg.text;
      root.dataset.generated = String(Number(root.dataset.generated || 0) + 1);
    } else if (msg.type === "exported") {
      save(`${msg.manifest.name}.json`, JSON.stringify(msg.manifest), "application/json");
      save(`${msg.manifest.name}.bin`, msg.weights, "application/octet-stream");
      say("Downloaded my-text.json and my-text.bin: the book's runtime (transformer.mjs, cli.mjs) loads them.");
    } else if (msg.type === "error") {
      if (!trained && state !== "idle") {
        if (worker) worker.end();
        worker = null;
        setState("idle");
      } else if (msg.fatal) {
        setState("idle"); // the worker keeps the last good weights, for Generate
      }
      say(msg.fatal ? `Training stopped: ${msg.message}` : msg.message, true);
    }
  }
  function save(name, data, type) {
    const url = URL.createObjectURL(new Blob([data], { type }));
    const a = h("a", { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  file.addEventListener("change", async () => {
    const f = file.files[0];
    if (!f) return;
    if (f.size > 4 * MAX_CHARS) { // checked before a byte is read
      say(`That file is ${(f.size / 1e6).toFixed(1)} MB: at most about 1 MB of text.`, true);
      file.value = "";
      return;
    }
    text.value = await f.text();
    say(`Read ${f.name}.`);
  });
  train.addEventListener("click", () => {
    if (state === "running") {
      worker.post({ type: "pause" });
      setState("paused");
      say("Paused. Generate and Download use the model as it is now.");
      return;
    }
    if (state === "paused") {
      worker.post({ type: "resume" });
      setState("running");
      return;
    }
    const problem = finetuning() ? checkText(text.value, null, FINETUNE.T) : checkText(text.value, preset.value);
    if (problem) return say(problem, true);
    let rate;
    if (lr.value.trim() !== "") {
      rate = Number(lr.value.trim());
      const bad = checkLearningRate(rate);
      if (bad) return say(bad.replace("NaN", JSON.stringify(lr.value.trim())), true);
    }
    if (typeof Worker === "undefined") return say("This browser cannot run a Web Worker.", true);
    if (worker) worker.end();
    trainPts = [];
    heldPts = [];
    shakPts = [];
    trained = false;
    mode = source.value === "full" ? "full" : finetuning() ? "lora" : "scratch";
    for (const key of ["heldOutFirst", "heldOut", "shakespeare", "shakespeareFirst", "trainable"]) delete root.dataset[key];
    info.hidden = compare.hidden = true;
    root.dataset.mode = mode;
    output.textContent = "";
    worker = startWorker(timed(root, onMessage), (m) => say(`Training stopped: ${m}`, true));
    if (mode === "scratch") worker.post({ type: "start", task: "text", text: text.value, preset: preset.value, lr: rate });
    else worker.post({ type: "start", task: "finetune", text: text.value, mode, rank: mode === "lora" ? Number(source.value.slice(5)) : undefined, lr: rate });
    setState("running");
    say(mode === "scratch" ? "Building the model…" : "Loading chapter 11's model (3.7 MB) and measuring it before finetuning…");
  });
  stop.addEventListener("click", () => {
    if (!worker) return;
    worker.post({ type: "stop" });
    setState("idle");
    say("Stopped. Generate and Download use the model as it is; Train starts a new one.");
  });
  generate.addEventListener("click", () => {
    if (!worker || !trained) return;
    worker.post({ type: "generate", prompt: prompt.value, n: 300, temperature: 0.8, seed: Date.now() % 100000 });
  });
  download.addEventListener("click", () => {
    if (worker && trained) worker.post({ type: "export" });
  });
  redraw();
  new ResizeObserver((entries) => {
    boxWidth = Math.floor(entries[0].contentRect.width);
    redraw();
  }).observe(root);
}

/** Mount every training widget of the page (once). */
export function mountTraining(doc = document) {
  let n = 0;
  for (const root of doc.querySelectorAll(".aft-widget[data-train]:not([data-mounted])")) {
    root.dataset.mounted = "";
    if (!root.id) root.id = `aft-train-${n}`;
    n += 1;
    try {
      if (root.dataset.train === "induction") mountInduction(root);
      else if (root.dataset.train === "text") mountText(root);
      else throw new Error(`unknown training widget ${root.dataset.train}`);
      root.classList.add("aft-live");
    } catch (err) {
      root.append(h("p", { class: "aft-status aft-error" }, `This widget could not start: ${err.message}`));
    }
  }
}
