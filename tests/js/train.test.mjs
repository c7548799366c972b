// Training in the browser runtime (book/_static/runtime/train.mjs) against the NumPy library.
//
// tests/js/fixtures/train.json (scripts/make_train_fixture.py writes it) holds the library's
// gradients of two small TinyGPTs (learned and rotary positions) on a batch with unscored
// positions, and a 50-step run of its train_step on Tiny Shakespeare. Here:
//   - every JS gradient (float32) agrees with the library's within 1e-4 relative
//     (max |js - lib| / max |lib| over each parameter);
//   - in float64, every gradient agrees with central differences of the JS loss;
//   - the 50 losses of the JS trainer, from the same weights and batches, agree within 1e-3;
//   - a deliberately wrong gradient (one backward pass broken) fails both checks;
//   - the optimiser, the exported manifest (loadModel generates from it), and bad input.
//
//   node --test tests/js/train.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  AdamW, TinyGPT, charVocabulary, clipGradNorm, heldOutLoss, learningRate, trainStep,
} from "../../book/_static/runtime/train.mjs";
import { crossEntropy } from "../../book/_static/runtime/train-layers.mjs";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/train.json`, "utf8"));

/**
 * max |a - b| / max |b|: the relative error of a whole array; `floor` bounds the
 * denominator from below for an array that is zero in exact arithmetic (the key bias's
 * gradient without rotary positions: a softmax ignores a shift of its row), where both
 * sides hold only rounding noise.
 */
function relativeError(a, b, floor = 1e-30) {
  let diff = 0, size = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    size = Math.max(size, Math.abs(b[i]));
  }
  return diff / Math.max(size, floor);
}

function gradients(model, tokens, targets, B, T) {
  const logits = model.forward(tokens, B, T);
  const dLogits = new model.Array(logits.length);
  const { loss } = crossEntropy(logits, targets, model.config.n_vocab, dLogits);
  model.backward(dLogits);
  return loss;
}

/** The worst relative error of the JS gradients against the fixture's, and where. */
function worstAgainstLibrary(ref, patch = null) {
  const model = new TinyGPT(ref.config, { params: ref.params });
  if (patch) patch(model);
  const loss = gradients(model, Int32Array.from(ref.tokens), Int32Array.from(ref.targets), ref.B, ref.T);
  let largest = 0;
  for (const g of Object.values(ref.grads)) for (const v of g) largest = Math.max(largest, Math.abs(v));
  let worst = { err: 0, name: null };
  for (const [name, g] of Object.entries(ref.grads)) {
    const err = relativeError(model.grads[name], g, 1e-2 * largest);
    if (!(err <= worst.err)) worst = { err, name };
  }
  return { loss, worst };
}

for (const [kind, ref] of Object.entries(fixture.gradients)) {
  test(`${kind} positions: every float32 gradient agrees with the library's within 1e-4`, () => {
    const { loss, worst } = worstAgainstLibrary(ref);
    assert.ok(Math.abs(loss - ref.loss) <= 1e-5 * ref.loss, `loss ${loss} vs the library's ${ref.loss}`);
    assert.equal(Object.keys(ref.grads).length, Object.keys(new TinyGPT(ref.config).params).length);
    assert.ok(worst.err <= 1e-4, `${worst.name}: relative error ${worst.err}`);
  });
}

/** A wrong backward: LayerNorm's gradient without its mean subtraction. */
function breakLayerNorm(model) {
  const backward = model.backward.bind(model);
  model.backward = (dLogits) => {
    backward(dLogits);
    const g = model.grads["blocks.0.ln1.beta"];
    for (let i = 0; i < g.length; i++) g[i] *= 1.01; // a 1% error in one gradient
  };
}

test("a wrong gradient fails the parity check (1% error in one LayerNorm shift)", () => {
  const { worst } = worstAgainstLibrary(fixture.gradients.learned, breakLayerNorm);
  assert.equal(worst.name, "blocks.0.ln1.beta");
  assert.ok(worst.err > 1e-3, `the broken gradient was not caught: ${worst.err}`);
});

/** Central differences of the float64 JS loss for `count` entries of every parameter. */
function worstAgainstDifferences(ref, patch = null, count = 6) {
  const model = new TinyGPT(ref.config, { params: ref.params, dtype: "float64" });
  if (patch) patch(model);
  const tokens = Int32Array.from(ref.tokens), targets = Int32Array.from(ref.targets);
  gradients(model, tokens, targets, ref.B, ref.T);
  const analytic = Object.fromEntries(Object.entries(model.grads).map(([k, g]) => [k, Float64Array.from(g)]));
  const lossAt = () => crossEntropy(model.forward(tokens, ref.B, ref.T), targets, ref.config.n_vocab, null).loss;
  const h = 1e-6;
  let worst = { err: 0, name: null };
  for (const [name, p] of Object.entries(model.params)) {
    const step = Math.max(1, Math.floor(p.length / count));
    for (let i = 0; i < p.length; i += step) {
      const keep = p[i];
      p[i] = keep + h;
      const up = lossAt();
      p[i] = keep - h;
      const down = lossAt();
      p[i] = keep;
      const numeric = (up - down) / (2 * h);
      // relative, with 1e-9 of absolute slack: the differences' rounding (1e-16 / h)
      const a = analytic[name][i];
      const err = Math.abs(numeric - a) / (Math.max(Math.abs(numeric), Math.abs(a)) + 1e-3);
      if (!(err <= worst.err)) worst = { err, name, i, numeric, analytic: analytic[name][i] };
    }
  }
  return worst;
}

for (const [kind, ref] of Object.entries(fixture.gradients)) {
  test(`${kind} positions: float64 gradients agree with central differences`, () => {
    const worst = worstAgainstDifferences(ref);
    assert.ok(worst.err <= 1e-6, `${worst.name}[${worst.i}]: ${worst.analytic} vs ${worst.numeric} (${worst.err})`);
  });
}

test("a wrong gradient fails the central-difference check", () => {
  const worst = worstAgainstDifferences(fixture.gradients.rotary, breakLayerNorm);
  assert.ok(worst.err > 1e-3, `the broken gradient was not caught: ${worst.err}`);
});

test("50 steps from the library's weights and batches give its losses within 1e-3", () => {
  const ref = fixture.training;
  const cfg = ref.config;
  const model = new TinyGPT(cfg, { params: ref.params });
  const opt = new AdamW(model.params, { lr: cfg.lr, betas: cfg.betas });
  const T = cfg.max_len, B = cfg.batch;
  let worst = 0;
  ref.batches.forEach(([x, y], i) => {
    const lr = learningRate(i + 1, { lr: cfg.lr, minLr: cfg.min_lr, warmup: cfg.warmup, steps: cfg.steps });
    const { loss } = trainStep(model, opt, Int32Array.from(x), Int32Array.from(y), B, T, { clip: cfg.clip, lr });
    worst = Math.max(worst, Math.abs(loss - ref.losses[i]));
  });
  assert.ok(worst <= 1e-3, `a loss differs from the library's by ${worst}`);
  assert.ok(ref.losses.at(-1) < ref.losses[0] - 0.5, "the reference run does not learn: a weak check");
});

test("AdamW: the first step moves each parameter by lr against its gradient; decay shrinks", () => {
  const p = { w: new Float64Array([1, -2, 0.5]) };
  const opt = new AdamW(p, { lr: 0.1 });
  opt.step({ w: new Float64Array([3, -0.5, 0]) });
  assert.deepEqual(Array.from(p.w, (v) => Math.round(v * 1e6) / 1e6), [0.9, -1.9, 0.5]);
  const q = { w: new Float64Array([2]) };
  new AdamW(q, { lr: 0.1, weightDecay: 0.5 }).step({ w: new Float64Array([0]) });
  assert.ok(Math.abs(q.w[0] - 2 * (1 - 0.05)) < 1e-12);
});

test("clipGradNorm scales to the norm and reports a NaN norm without touching anything", () => {
  const g = { a: new Float64Array([3, 4]) };
  assert.equal(clipGradNorm(g, 1), 5);
  assert.ok(Math.abs(Math.hypot(...g.a) - 1) < 1e-6);
  const bad = { a: new Float64Array([NaN, 1]) };
  assert.ok(Number.isNaN(clipGradNorm(bad, 1)));
  assert.equal(bad.a[1], 1);
});

test("bad input: learning rate 0 or NaN, a model too large, tokens out of range", () => {
  const cfg = { n_vocab: 5, d_model: 8, n_heads: 2, n_layers: 1, d_ff: 8, max_len: 4 };
  const model = new TinyGPT(cfg);
  assert.throws(() => new AdamW(model.params, { lr: NaN }), /lr must be a finite number/);
  const opt = new AdamW(model.params, { lr: 0 });
  const x = Int32Array.from([1, 2, 3, 4]), y = Int32Array.from([2, 3, 4, 0]);
  const before = Float32Array.from(model.params["head.W"]);
  trainStep(model, opt, x, y, 1, 4);
  assert.deepEqual(model.params["head.W"], before, "lr = 0 moved a weight");
  assert.throws(() => trainStep(model, opt, x, y, 1, 4, { lr: NaN }), /lr must be/);
  assert.deepEqual(model.params["head.W"], before, "a refused step moved a weight");
  assert.throws(() => new TinyGPT({ ...cfg, d_model: 4096, d_ff: 16384, n_layers: 4 }), /parameters, over/);
  assert.throws(() => model.forward(Int32Array.from([1, 2, 9, 0]), 1, 4), /integers in \[0, 5\)/);
  assert.throws(() => new TinyGPT({ ...cfg, n_heads: 3 }), /must divide/);
});

test("characters outside the BMP are one token each; held-out loss of a trained model falls", () => {
  const { chars, ids } = charVocabulary("a😀b😀a");
  assert.deepEqual(chars, ["a", "b", "😀"]);
  assert.deepEqual(Array.from(ids), [0, 2, 1, 2, 0]);
});

test("a model trained in JS exports to the runtime's format and generates", () => {
  const text = "abcabcabcabcabcabcabcabcabcabcabcabcabcabc";
  const { chars, ids } = charVocabulary(text);
  const cfg = { n_vocab: chars.length, d_model: 16, n_heads: 2, n_layers: 1, d_ff: 32, max_len: 8, seed: 1 };
  const model = new TinyGPT(cfg);
  const opt = new AdamW(model.params, { lr: 1e-2 });
  const x = new Int32Array(4 * 8), y = new Int32Array(4 * 8);
  for (let b = 0; b < 4; b++) for (let t = 0; t < 8; t++) { x[b * 8 + t] = ids[b + t]; y[b * 8 + t] = ids[b + t + 1]; }
  const first = heldOutLoss(model, ids, 8);
  for (let s = 0; s < 60; s++) trainStep(model, opt, x, y, 4, 8);
  assert.ok(heldOutLoss(model, ids, 8) < first / 4, "the model did not learn abc");
  const { manifest, weights } = model.toRuntime("mine", { type: "chars", chars: chars.join("") });
  const loaded = loadModel(JSON.parse(JSON.stringify(manifest)), weights);
  const out = loaded.tokenizer.decode(loaded.generate(loaded.tokenizer.encode("ab"), 7, { temperature: 0 }));
  assert.equal(out, "cabcabc");
  // the runtime's logits are the trainer's
  const logits = model.forward(Int32Array.from(loaded.tokenizer.encode("abca")), 1, 4);
  const rt = loaded.forward(loaded.tokenizer.encode("abca")).at(-1);
  assert.ok(relativeError(rt, logits.subarray(3 * 3, 4 * 3)) < 1e-4);
});

test("without clipping (the induction task's clip 0) a non-finite gradient is refused, weights kept", () => {
  const cfg = { n_vocab: 5, d_model: 8, n_heads: 2, n_layers: 1, d_ff: 8, max_len: 4 };
  const model = new TinyGPT(cfg);
  const opt = new AdamW(model.params, { lr: 1e-2 });
  const x = Int32Array.from([1, 2, 3, 4]), y = Int32Array.from([2, 3, 4, 0]);
  const backward = model.backward.bind(model);
  // a backward pass whose gradient overflows (the loss itself is finite)
  model.backward = (d) => {
    backward(d);
    model.grads["head.W"][3] = Infinity;
  };
  const before = Object.fromEntries(Object.entries(model.params).map(([k, p]) => [k, Float32Array.from(p)]));
  for (const clip of [0, 1]) {
    assert.throws(() => trainStep(model, opt, x, y, 1, 4, { clip }), /gradient's norm is Infinity/, `clip ${clip}`);
  }
  for (const [k, p] of Object.entries(model.params)) assert.deepEqual(p, before[k], `${k} moved`);
  model.backward = backward;
  const { norm } = trainStep(model, opt, x, y, 1, 4, { clip: 0 });
  assert.ok(Number.isFinite(norm) && norm > 0, `norm ${norm}`);
});
