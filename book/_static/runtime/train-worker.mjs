// train-worker.mjs: training off the page's main thread, in a Web Worker (a module worker:
// new Worker(url, {type: "module"})). The page stays responsive while the steps run.
//
// Messages in (postMessage):
//   {type: "start", task: "induction"}                      chapter 9's copy task
//   {type: "start", task: "text", text, preset, lr, steps}  a character model of `text`
//   {type: "start", task: "finetune", text, mode: "full" | "lora", rank, lr, steps}
//                                     chapter 11's model finetuned on `text` (train-finetune.mjs)
//   {type: "pause"} | {type: "resume"} | {type: "stop"}
//   {type: "generate", prompt, n, temperature, seed}        (text task) continue a prompt
//   {type: "export"}                                        (text task) the runtime's files
//   {type: "ablate", heads: [[layer, head], ...]}           (induction) those heads switched off
// Messages out:
//   {type: "ready", params, vocab, train, heldOut}          the model is built
//   {type: "progress", step, loss, lr, msPerStep, heldOut?, shakespeare?, scores?, maps?}
//   {type: "paused"} | {type: "done", step} | {type: "stopped"}
//   {type: "generated", text} | {type: "exported", manifest, weights (transferred)}
//   {type: "ablated", heads, accuracy, baseline, tokens, guesses, targets, segment}
//                                     the held-out copy accuracy with those heads off (and with
//                                     none), and the first held-out sequence's greedy guesses
//   {type: "error", message}                                a sentence for the reader
//
// The session itself (createSession) runs in node too: the tests drive it directly.

import { AdamW, TinyGPT, charVocabulary, learningRate, randomWindows, trainStep } from "./train.mjs";
import { copyBatch, inductionScores, INDUCTION, PRESETS } from "./train-tasks.mjs";
import { CharTokenizer, argmax, loadModel, makeRng, setZeroHeads } from "./transformer.mjs";
import { FINETUNE, finetuneJob } from "./train-finetune.mjs";

/**
 * The longest text the own-text task accepts, in characters: "about 1 MB", with room for
 * Tiny Shakespeare (1,115,394 characters), the text the goal names.
 */
export const MAX_CHARS = 1_200_000;
/** The most distinct characters (the vocabulary), so that the output layer stays small. */
export const MAX_VOCAB = 2000;
/** How long the worker computes before it reads its messages again (pause, stop). */
const SLICE_MS = 40;

/** Check the own-text task's input (T: the context, the preset's by default); returns an error sentence, or null. */
export function checkText(text, preset, T = PRESETS[preset]?.max_len ?? 32) {
  if (typeof text !== "string") return "The text must be a string.";
  if (text.length > 4 * MAX_CHARS) return `The text is too long: at most ${MAX_CHARS.toLocaleString("en")} characters.`;
  const n = Array.from(text).length;
  if (n > MAX_CHARS) return `The text is ${n.toLocaleString("en")} characters long: at most ${MAX_CHARS.toLocaleString("en")}.`;
  const least = 10 * (T + 2);
  if (n < least) return `The text is ${n} characters long: this size needs at least ${least} (the last 10% is held out, and each must hold a window of ${T + 1}).`;
  const distinct = new Set(text).size;
  if (distinct < 2) return "The text has only one distinct character: there is nothing to learn.";
  return null;
}

/** Check a learning rate typed by the reader; returns an error sentence, or null. */
export function checkLearningRate(lr) {
  if (typeof lr !== "number" || !Number.isFinite(lr) || lr <= 0 || lr > 0.1) {
    return `The learning rate must be a number above 0 and at most 0.1, got ${String(lr)}.`;
  }
  return null;
}

/** `count` windows of T + 1 spread evenly over `ids`: a fixed held-out sample. */
function spreadWindows(ids, T, count) {
  const n = Math.min(count, Math.floor((ids.length - 1) / T));
  const last = ids.length - T - 1;
  const x = new Int32Array(n * T), y = new Int32Array(n * T);
  for (let k = 0; k < n; k++) {
    const start = n === 1 ? 0 : Math.floor((k * last) / (n - 1));
    for (let t = 0; t < T; t++) {
      x[k * T + t] = ids[start + t];
      y[k * T + t] = ids[start + t + 1];
    }
  }
  return { x, y, n };
}

/**
 * The induction model as it is now, with `heads` ([layer, head] pairs) switched off: run by
 * the book's runtime (transformer.mjs, the zero ablation of attention_lib.interp) on the
 * held-out copy-task batch. Returns {accuracy} on the predictable positions (the share of
 * the repeat's tokens guessed right, as inductionScores counts it) and the greedy guess at
 * every position of the first sequence. A bad head list throws before anything runs.
 */
export function switchedOff(model, held, heads) {
  const { manifest, weights } = model.toRuntime("induction", { type: "chars", chars: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef" });
  const runtime = loadModel(manifest, weights);
  setZeroHeads(runtime, heads);
  const { max_len: L, n_vocab: V } = model.config;
  const n = held.tokens.length / L;
  let right = 0, scored = 0;
  const guesses = [];
  for (let k = 0; k < n; k++) {
    const { logits } = runtime.forwardRows(Array.from(held.tokens.subarray(k * L, (k + 1) * L)), runtime.newCache(), false, true);
    for (let i = 0; i < L; i++) {
      const guess = argmax(logits.subarray(i * V, (i + 1) * V));
      if (k === 0) guesses.push(guess);
      const target = held.targets[k * L + i];
      if (target < 0) continue;
      right += guess === target ? 1 : 0;
      scored += 1;
    }
  }
  return { accuracy: right / scored, guesses };
}

/**
 * A training session that reports through post(message, transfer). Call handle(message)
 * with each message in; tick() runs one slice of steps (the worker schedules it).
 */
export function createSession(post, schedule = (f) => setTimeout(f, 0)) {
  let state = "idle"; // idle | running | paused | done | stopped
  let job = null;
  let loads = 0; // finetuning runs started (each loads its model first)

  function fail(err) {
    state = "stopped"; // the weights are those of the last good step: Generate still works
    post({ type: "error", fatal: true, message: err instanceof Error ? err.message : String(err) });
  }

  function startInduction(msg) {
    const config = { ...INDUCTION.config, seed: msg.seed ?? INDUCTION.config.seed };
    const model = new TinyGPT(config);
    const lr = msg.lr ?? INDUCTION.lr;
    const opt = new AdamW(model.params, { lr });
    const L = config.max_len;
    const held = copyBatch(makeRng(5), 64, L, config.n_vocab);
    const every = msg.every ?? 10;
    job = {
      model, opt, held, step: 0, steps: msg.steps ?? INDUCTION.steps, lr, every, started: performance.now(),
      next() {
        const batch = copyBatch(this.rng, INDUCTION.batch, L, config.n_vocab);
        return trainStep(model, opt, batch.tokens, batch.targets, INDUCTION.batch, L, { clip: 0, lr }).loss;
      },
      report(msg) {
        const logits = model.forward(held.tokens, 64, L);
        msg.scores = inductionScores(model, held, 64, L, logits);
        // the maps of both layers for the first held-out sequence, and where it repeats
        msg.maps = [Float32Array.from(model.attention(0, 0, 0)), Float32Array.from(model.attention(1, 0, 0))];
        msg.tokens = Array.from(held.tokens.subarray(0, L));
        msg.segment = held.segments[0];
      },
      rng: makeRng(msg.seed ?? 7),
    };
    post({ type: "ready", params: Object.values(model.params).reduce((a, p) => a + p.length, 0), L });
  }

  function startText(msg) {
    const bad = checkText(msg.text, msg.preset);
    if (bad) throw new RangeError(bad);
    const preset = PRESETS[msg.preset];
    const { chars, ids } = charVocabulary(msg.text);
    if (chars.length > MAX_VOCAB) throw new RangeError(`The text has ${chars.length} distinct characters: at most ${MAX_VOCAB}, one output per character.`);
    const nTrain = Math.floor(0.9 * ids.length);
    const train = ids.subarray(0, nTrain), held = ids.subarray(nTrain);
    const T = preset.max_len;
    const config = { n_vocab: chars.length, d_model: preset.d_model, n_heads: preset.n_heads, n_layers: preset.n_layers,
      d_ff: preset.d_ff, max_len: T, positions: "learned", seed: msg.seed ?? 1337 };
    const model = new TinyGPT(config);
    const lr = msg.lr ?? preset.lr;
    const opt = new AdamW(model.params, { lr, betas: [0.9, 0.99] });
    const steps = msg.steps ?? 100000;
    const sample = spreadWindows(held, T, msg.heldOutWindows ?? 48);
    const rng = makeRng(msg.seed ?? 1338);
    const schedule = { lr, minLr: lr / 10, warmup: 50, steps: Math.max(steps, 51) };
    const tokenizer = new CharTokenizer(chars);
    job = {
      model, opt, step: 0, steps, lr, every: msg.every ?? 25, started: performance.now(), chars, tokenizer, preset: msg.preset,
      next() {
        const { x, y } = randomWindows(rng, train, preset.batch, T);
        const rate = msg.steps ? learningRate(this.step + 1, schedule) : (this.step < 50 ? (lr * (this.step + 1)) / 50 : lr);
        return trainStep(model, opt, x, y, preset.batch, T, { clip: 1.0, lr: rate }).loss;
      },
      report(out) {
        let total = 0;
        for (let b0 = 0; b0 < sample.n; b0 += 16) {
          const b = Math.min(16, sample.n - b0);
          total += model.loss(sample.x.subarray(b0 * T, (b0 + b) * T), sample.y.subarray(b0 * T, (b0 + b) * T), b, T) * b;
        }
        out.heldOut = total / sample.n;
      },
    };
    post({ type: "ready", params: Object.values(model.params).reduce((a, p) => a + p.length, 0), vocab: chars.length,
      train: train.length, heldOut: held.length, T });
  }

  function tick() {
    if (state !== "running" || !job) return;
    try {
      const start = performance.now();
      let loss = NaN, done = 0;
      while (performance.now() - start < SLICE_MS && job.step < job.steps) {
        loss = job.next();
        job.step += 1;
        done += 1;
        if (job.step % job.every === 0 || job.step === job.steps) {
          const msg = { type: "progress", step: job.step, loss, lr: job.opt.lr, msPerStep: (performance.now() - start) / done,
            seconds: (performance.now() - job.started) / 1000 };
          job.report(msg);
          const transfer = msg.maps ? msg.maps.map((m) => m.buffer) : [];
          post(msg, transfer);
          break;
        }
      }
      if (job.step >= job.steps) {
        state = "done";
        post({ type: "done", step: job.step });
        return;
      }
    } catch (err) {
      fail(err);
      return;
    }
    schedule(tick);
  }

  function handle(msg) {
    try {
      if (!msg || typeof msg !== "object") throw new TypeError("a message must be an object");
      switch (msg.type) {
        case "start":
          if (["running", "paused", "loading"].includes(state)) throw new Error("Training is already running: stop it first.");
          if (msg.lr !== undefined && checkLearningRate(msg.lr)) throw new RangeError(checkLearningRate(msg.lr));
          // a NaN steps or every would leave the slices spinning without a step or a report,
          // heldOutWindows 0 would report a NaN loss: whole numbers only, checked by name
          for (const [key, least] of [["steps", 1], ["every", 1], ["heldOutWindows", 1], ["seed", 0]]) {
            const value = msg[key];
            if (value !== undefined && !(Number.isInteger(value) && value >= least)) {
              throw new RangeError(`${key} must be an integer >= ${least}, got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
            }
          }
          if (msg.task === "finetune") {
            const bad = checkText(msg.text, null, FINETUNE.T);
            if (bad) throw new RangeError(bad);
            // chapter 11's model is fetched first (3.7 MB): pause and stop act meanwhile
            state = "loading";
            const run = ++loads; // a later start (after a stop) supersedes this one
            finetuneJob(msg).then((loaded) => {
              if (run !== loads || state === "stopped") return;
              job = loaded;
              post(job.ready);
              if (state === "loading") state = "running";
              if (state === "running") schedule(tick);
            }, (err) => {
              if (run !== loads) return;
              state = "idle";
              post({ type: "error", message: err instanceof Error ? err.message : String(err) });
            });
            break;
          }
          if (msg.task === "induction") startInduction(msg);
          else if (msg.task === "text") startText(msg);
          else throw new RangeError(`unknown task ${msg.task}`);
          state = "running";
          schedule(tick);
          break;
        case "pause":
          if (state === "running" || state === "loading") {
            state = "paused";
            post({ type: "paused", step: job ? job.step : 0 });
          }
          break;
        case "resume":
          if (state === "paused") {
            state = "running";
            schedule(tick);
          }
          break;
        case "stop":
          if (state === "running" || state === "paused" || state === "loading") state = "stopped";
          post({ type: "stopped", step: job ? job.step : 0 });
          break;
        case "generate": {
          if (!job || !job.tokenizer) throw new Error("Train a model first.");
          const { n = 200, temperature = 0.8, seed = 1 } = msg;
          const shown = (v) => (typeof v === "string" ? JSON.stringify(v) : String(v));
          if (!(Number.isInteger(n) && n >= 1 && n <= 2000)) throw new RangeError(`n must be an integer from 1 to 2000, got ${shown(n)}`);
          if (!(Number.isFinite(temperature) && temperature >= 0)) throw new RangeError(`temperature must be a number >= 0, got ${shown(temperature)}`);
          if (!(Number.isInteger(seed) && seed >= 0)) throw new RangeError(`seed must be an integer >= 0, got ${shown(seed)}`);
          const { manifest, weights } = job.model.toRuntime("generate", { type: "chars", chars: job.chars.join("") });
          const runtime = loadModel(manifest, weights);
          const prompt = typeof msg.prompt === "string" ? msg.prompt : "";
          const unknown = job.tokenizer.unknown(prompt);
          if (unknown.length) throw new RangeError(`The prompt has characters the text never had: ${unknown.slice(0, 5).join(" ")}`);
          const ids = prompt ? job.tokenizer.encode(prompt) : [0];
          const out = runtime.generate(ids, n, { temperature, seed });
          post({ type: "generated", prompt, text: prompt + job.tokenizer.decode(out) });
          break;
        }
        case "export": {
          if (!job || !job.tokenizer) throw new Error("Train a model first.");
          const { manifest, weights } = job.model.toRuntime("my-text", { type: "chars", chars: job.chars.join("") },
            { preset: job.preset, steps: job.step });
          post({ type: "exported", manifest, weights }, [weights]);
          break;
        }
        case "ablate": {
          if (!job || !job.held) throw new Error("Train the model first: the switches act on the model being trained.");
          const off = switchedOff(job.model, job.held, msg.heads); // checks the heads first
          const on = switchedOff(job.model, job.held, []);
          const L = job.model.config.max_len;
          post({ type: "ablated", heads: msg.heads.map((p) => [...p]), step: job.step, accuracy: off.accuracy,
            baseline: on.accuracy, guesses: off.guesses, guessesOn: on.guesses,
            tokens: Array.from(job.held.tokens.subarray(0, L)), targets: Array.from(job.held.targets.subarray(0, L)),
            segment: job.held.segments[0] });
          break;
        }
        default:
          throw new RangeError(`unknown message type ${msg.type}`);
      }
    } catch (err) {
      post({ type: "error", message: err instanceof Error ? err.message : String(err) });
      if (msg && msg.type === "start" && state !== "running") state = "idle";
    }
  }

  return {
    handle, tick,
    get state() { return state; },
    get step() { return job ? job.step : 0; },
    get model() { return job ? job.model : null; }, // for node (tests, benchmarks)
  };
}

// In a worker: wire the session to the worker's messages.
if (typeof WorkerGlobalScope !== "undefined" && globalThis instanceof WorkerGlobalScope) {
  const session = createSession((msg, transfer = []) => globalThis.postMessage(msg, transfer));
  globalThis.onmessage = (event) => session.handle(event.data);
}
