// train-finetune.mjs: finetune chapter 11's Shakespeare model on the reader's own text, in the
// training worker (train-worker.mjs, task "finetune"): every weight (full finetuning) or LoRA
// adapters on the query and value projections (train-lora.mjs), the rest frozen.
//
// The job reports two held-out losses side by side: on the last 10% of the reader's text (what
// the finetuning is for) and on held-out Shakespeare, the text the model was trained on (what
// it forgets). Both are measured once before the first step: the untuned model, the baseline.
//
//   const job = await finetuneJob({text, mode: "lora", rank: 8, lr, steps});
//   job.ready           the "ready" message: parameters, trainable ones, the baseline losses
//   job.next()          one training step, returns its loss
//   job.report(msg)     msg.heldOut (your text) and msg.shakespeare, in nats per character

import { AdamW, TinyGPT, fromRuntime, learningRate, randomWindows, trainStep } from "./train.mjs";
import { LoRA } from "./train-lora.mjs";
import { CharTokenizer, makeRng } from "./transformer.mjs";

/** The finetuning run: context, batch, steps, learning rates, LoRA's ranks and alpha. */
export const FINETUNE = {
  T: 64, // of the model's 128: half the context, about twice the steps a second
  batch: 8,
  steps: 150,
  warmup: 20,
  lr: { full: 3e-4, lora: 2e-3 },
  ranks: [1, 2, 4, 8, 16],
  rank: 8,
  alpha: 16, // the library's default (lora.apply): scaling alpha / r
  targets: ["q", "v"],
  heldOutWindows: 24, // of T + 1 characters, from each held-out text
  every: 25,
};

/** Where the page finds the base model and the held-out Shakespeare (this site's files). */
const FILES = {
  manifest: "../models/shakespeare.json",
  weights: "../models/shakespeare.bin",
  shakespeare: "../models/shakespeare_heldout.txt",
};

async function fetchOk(name, kind) {
  const response = await fetch(new URL(FILES[name], import.meta.url));
  if (!response.ok) throw new Error(`Could not load chapter 11's model (${FILES[name]}: HTTP ${response.status}).`);
  return response[kind]();
}

/** Chapter 11's model and held-out Shakespeare: fetched from the site, or given (node). */
export async function loadBase(given = {}) {
  const [manifest, weights, shakespeare] = await Promise.all([
    given.manifest ?? fetchOk("manifest", "json"),
    given.weights ?? fetchOk("weights", "arrayBuffer"),
    given.shakespeare ?? fetchOk("shakespeare", "text"),
  ]);
  return { manifest, weights, shakespeare };
}

/**
 * The reader's text in the model's characters: {ids, dropped: {count, examples}}. A character
 * model knows only its own characters (Shakespeare's 65): the others are left out, and said.
 */
export function encodeFor(chars, text) {
  const lookup = new Map(chars.map((ch, i) => [ch, i]));
  const ids = [];
  const unknown = new Map();
  for (const ch of text) {
    const i = lookup.get(ch);
    if (i === undefined) unknown.set(ch, (unknown.get(ch) ?? 0) + 1);
    else ids.push(i);
  }
  const count = [...unknown.values()].reduce((a, b) => a + b, 0);
  return { ids: Int32Array.from(ids), dropped: { count, examples: [...unknown.keys()].slice(0, 8) } };
}

/** `count` windows of T + 1 spread evenly over `ids`: a fixed held-out sample. */
function spread(ids, T, count) {
  const n = Math.min(count, Math.floor((ids.length - 1) / T));
  const last = ids.length - T - 1;
  const x = new Int32Array(n * T), y = new Int32Array(n * T);
  for (let k = 0; k < n; k++) {
    const start = n === 1 ? 0 : Math.floor((k * last) / (n - 1));
    x.set(ids.subarray(start, start + T), k * T);
    y.set(ids.subarray(start + 1, start + T + 1), k * T);
  }
  return { x, y, n };
}

/** Mean loss of `model` on a held-out sample, 8 windows at a time. */
function sampleLoss(model, s, T) {
  let total = 0;
  for (let b0 = 0; b0 < s.n; b0 += 8) {
    const b = Math.min(8, s.n - b0);
    total += model.loss(s.x.subarray(b0 * T, (b0 + b) * T), s.y.subarray(b0 * T, (b0 + b) * T), b, T) * b;
  }
  return total / s.n;
}

/** A sentence if the finetuning settings are wrong, else null (checked before any loading). */
export function checkFinetune(msg) {
  if (!["full", "lora"].includes(msg.mode)) return `mode must be "full" or "lora", got ${JSON.stringify(msg.mode)}`;
  if (msg.mode === "lora" && msg.rank !== undefined && !FINETUNE.ranks.includes(msg.rank)) {
    return `rank must be one of ${FINETUNE.ranks.join(", ")}, got ${JSON.stringify(msg.rank)}`;
  }
  if (typeof msg.text !== "string") return "The text must be a string.";
  return null;
}

/**
 * The finetuning job for train-worker.mjs's session: msg {text, mode: "full" | "lora", rank,
 * lr, steps, seed, every, heldOutWindows, base: {manifest, weights, shakespeare} (node;
 * fetched from the site when absent)}. Throws a RangeError with a sentence for the reader.
 */
export async function finetuneJob(msg) {
  const bad = checkFinetune(msg);
  if (bad) throw new RangeError(bad);
  const T = FINETUNE.T;
  const least = 10 * (T + 2);
  // the length is checked before anything is fetched (a first screen on the raw text)
  if (Array.from(msg.text).length < least) {
    throw new RangeError(`The text is ${Array.from(msg.text).length} characters long: finetuning needs at least ${least} (the last 10% is held out, and each part must hold a window of ${T + 1}).`);
  }
  const base = await loadBase(msg.base ?? {});
  const { config, params, chars } = fromRuntime(base.manifest, base.weights);
  const { ids, dropped } = encodeFor(chars, msg.text);
  if (ids.length < least) {
    throw new RangeError(`Only ${ids.length} of the text's characters are in the model's vocabulary (Shakespeare's ${chars.length} characters; ` +
      `left out: ${dropped.examples.join(" ")}): finetuning needs at least ${least}.`);
  }
  const nTrain = Math.floor(0.9 * ids.length);
  const train = ids.subarray(0, nTrain), held = ids.subarray(nTrain);
  const shakespeare = encodeFor(chars, base.shakespeare).ids;
  const model = new TinyGPT({ ...config, seed: 0 }, { params });
  const lora = msg.mode === "lora" ? new LoRA(model, { rank: msg.rank ?? FINETUNE.rank, alpha: FINETUNE.alpha, targets: FINETUNE.targets, seed: msg.seed ?? 0 }) : null;
  const lr = msg.lr ?? FINETUNE.lr[msg.mode];
  const opt = new AdamW(lora ? lora.params : model.params, { lr, betas: [0.9, 0.99] });
  const steps = msg.steps ?? FINETUNE.steps;
  const schedule = { lr, minLr: lr / 10, warmup: Math.min(FINETUNE.warmup, steps - 1), steps };
  const windows = msg.heldOutWindows ?? FINETUNE.heldOutWindows;
  const samples = { heldOut: spread(held, T, windows), shakespeare: spread(shakespeare, T, windows) };
  const before = { heldOut: sampleLoss(model, samples.heldOut, T), shakespeare: sampleLoss(model, samples.shakespeare, T) };
  const total = Object.values(model.params).reduce((a, p) => a + p.length, 0);
  const rng = makeRng(msg.seed ?? 1338);
  return {
    model, opt, lora, step: 0, steps, lr, every: msg.every ?? FINETUNE.every, started: performance.now(),
    chars, tokenizer: new CharTokenizer(chars), preset: lora ? `finetuned-lora-r${lora.rank}` : "finetuned-full",
    ready: {
      type: "ready", task: "finetune", mode: msg.mode, rank: lora ? lora.rank : null, scaling: lora ? lora.scaling : null,
      params: total, trainable: lora ? lora.count : total, vocab: chars.length, train: train.length, heldOut: held.length,
      dropped, T, steps, before,
    },
    next() {
      const { x, y } = randomWindows(rng, train, FINETUNE.batch, T);
      return trainStep(model, opt, x, y, FINETUNE.batch, T, { clip: 1.0, lr: learningRate(this.step + 1, schedule) }).loss;
    },
    report(out) {
      out.heldOut = sampleLoss(model, samples.heldOut, T);
      out.shakespeare = sampleLoss(model, samples.shakespeare, T);
    },
  };
}
