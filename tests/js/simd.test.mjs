// The WebAssembly SIMD kernels (book/_static/runtime/kernels.wat, simd.mjs) against the
// scalar JavaScript they stand in for (the reference), and training on both paths.
//
//   - kernels-wasm.mjs is kernels.wat assembled by wabt (scripts/build_kernels.mjs): the
//     same bytes, rebuilt here (needs `npm ci`; skipped, saying so, without node_modules);
//   - dot_rows, dot_cols and the attention kernels agree with the scalar loops on awkward
//     sizes (lengths not a multiple of 4, odd row counts, one row), accumulate or not,
//     with arguments inside and outside the kernels' memory; a row's result does not
//     depend on the rows batched with it; growing the memory re-views the arena;
//   - a training step's every gradient, on the SIMD path and on the forced scalar path,
//     agrees with the library's (tests/js/fixtures/train.json) within 1e-4, and the
//     50-step run's losses within 1e-3 on both; a wrong kernel is caught.
//
//   node --test tests/js/simd.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Kernels, SIMD_SUPPORTED, setScalar, sharedKernels, simdActive, withScalar as scalar } from "../../book/_static/runtime/simd.mjs";
import {
  attentionBackward, attentionForward, crossEntropy, dotRows, geluForward, linearBackward,
} from "../../book/_static/runtime/train-layers.mjs";
import { AdamW, TinyGPT, learningRate, trainStep } from "../../book/_static/runtime/train.mjs";
import { makeRng } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/train.json`, "utf8"));

const rng = makeRng(7);
const random = (n) => Float32Array.from({ length: n }, () => rng() - 0.5);
const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
const maxAbs = (a) => a.reduce((m, x) => Math.max(m, Math.abs(x)), 0);


test("this engine has WebAssembly SIMD (node >= 16), and setScalar switches it off", () => {
  assert.equal(SIMD_SUPPORTED, true);
  assert.equal(simdActive(), true);
  scalar(() => {
    assert.equal(simdActive(), false);
    assert.equal(sharedKernels(), null);
  });
  assert.ok(sharedKernels() instanceof Kernels);
});

test("kernels-wasm.mjs is kernels.wat assembled by wabt, byte for byte", async (t) => {
  if (!existsSync(`${root}node_modules/wabt`)) {
    t.skip("wabt is not installed: run npm ci at the repository's root");
    return;
  }
  const { assemble, moduleText } = await import("../../scripts/build_kernels.mjs");
  const bytes = await assemble();
  assert.equal(moduleText(bytes), readFileSync(`${root}book/_static/runtime/kernels-wasm.mjs`, "utf8"));
  // and a changed source gives other bytes (the check can fail)
  const source = readFileSync(`${root}book/_static/runtime/kernels.wat`, "utf8");
  const other = await assemble(source.replace("(i32.const 16)", "(i32.const 32)"));
  assert.notDeepEqual(other, bytes);
});

const SIZES = [[1, 1, 1], [1, 10, 64], [2, 4, 8], [3, 5, 7], [7, 9, 13], [33, 17, 3], [64, 65, 48]];

test("dot_rows: C = A B^T and C += A B^T agree with the scalar loops on awkward sizes", () => {
  const k = new Kernels();
  for (const [nA, nB, len] of SIZES) {
    const A = random(nA * len), B = random(nB * len), C0 = random(nA * nB);
    for (const accumulate of [false, true]) {
      const want = scalar(() => dotRows(A, nA, B, nB, len, Float32Array.from(C0), accumulate));
      const got = k.dotRows(A, nA, B, nB, len, Float32Array.from(C0), accumulate);
      // float32 sums against double sums: a few units of float32 rounding of the terms
      assert.ok(maxDiff(got, want) <= 1e-6 * (len + 1), `${nA} x ${nB} x ${len}: ${maxDiff(got, want)}`);
    }
  }
});

test("dot_rows: operands inside the kernels' memory give the same result without copies", () => {
  const k = new Kernels();
  const [nA, nB, len] = [5, 6, 11];
  const A = k.alloc(nA * len).view, B = k.alloc(nB * len).view, C = k.alloc(nA * nB).view;
  A.set(random(nA * len));
  B.set(random(nB * len));
  const outside = k.dotRows(Float32Array.from(A), nA, Float32Array.from(B), nB, len, new Float32Array(nA * nB));
  k.dotRows(A, nA, B, nB, len, C);
  assert.deepEqual(Array.from(C), Array.from(outside));
});

test("a row's result does not depend on the rows batched with it (bit for bit)", () => {
  const k = new Kernels();
  const [nA, nB, len] = [5, 11, 13];
  const A = random(nA * len), B = random(nB * len);
  const C = k.dotRows(A, nA, B, nB, len, new Float32Array(nA * nB));
  for (let r = 0; r < nA; r++) {
    const one = k.dotRows(A.subarray(r * len, (r + 1) * len), 1, B, nB, len, new Float32Array(nB));
    assert.deepEqual(Array.from(one), Array.from(C.subarray(r * nB, (r + 1) * nB)));
  }
});

test("dot_cols: C += A^T B agrees with the library's formula on awkward sizes", () => {
  const k = new Kernels();
  for (const [n, m, nOut] of [[1, 1, 1], [5, 3, 7], [8, 4, 8], [13, 9, 17], [300, 64, 65], [7, 8, 16]]) {
    const A = random(n * m), B = random(n * nOut), C0 = random(m * nOut);
    const want = Float64Array.from(C0);
    for (let p = 0; p < m; p++) for (let j = 0; j < nOut; j++) for (let i = 0; i < n; i++) want[p * nOut + j] += A[i * m + p] * B[i * nOut + j];
    const got = k.dotCols(A, n, m, B, nOut, Float32Array.from(C0));
    assert.ok(maxDiff(got, want) <= 1e-6 * (n + 1), `${n} x ${m} x ${nOut}: ${maxDiff(got, want)}`);
  }
});

test("growing the memory detaches old views: the arena's listeners re-view, scratch still works", () => {
  const k = new Kernels();
  const { offset, view } = k.alloc(8);
  view.set([1, 2, 3, 4, 5, 6, 7, 8]);
  let fresh = view;
  k.onGrow((buffer) => (fresh = new Float32Array(buffer, offset, 8)));
  const big = 200000; // 800 kB of scratch: more than the first page
  const C = k.dotRows(random(big), 1, random(big), 1, big, new Float32Array(1));
  assert.ok(Number.isFinite(C[0]));
  assert.equal(view.length, 0, "the old view is detached (if not, the test proves nothing)");
  assert.deepEqual(Array.from(fresh), [1, 2, 3, 4, 5, 6, 7, 8]);
});

test("causal attention, forward and backward: the SIMD path agrees with the scalar loops", () => {
  for (const [B, T, H, hd] of [[2, 5, 2, 4], [1, 9, 3, 6], [3, 8, 1, 8]]) {
    const d = H * hd, n = B * T;
    const q = random(n * d), k = random(n * d), v = random(n * d), g = random(n * d);
    const run = () => {
      const ctx = new Float32Array(n * d), P = new Float32Array(B * H * T * T);
      attentionForward(q, k, v, B, T, H, hd, ctx, P);
      const dq = new Float32Array(n * d), dk = new Float32Array(n * d), dv = new Float32Array(n * d);
      attentionBackward(g, q, k, v, P, B, T, H, hd, dq, dk, dv);
      return { ctx, P, dq, dk, dv };
    };
    const want = scalar(run), got = run();
    for (const key of Object.keys(want)) {
      const err = maxDiff(got[key], want[key]) / maxAbs(want[key]);
      assert.ok(err <= 1e-5, `${key} (${B}, ${T}, ${H}, ${hd}): relative ${err}`);
    }
  }
});

test("linearBackward: dW, db, dx on the SIMD path agree with the scalar path", () => {
  const [n, nIn, nOut] = [37, 12, 65];
  const x = random(n * nIn), W = random(nIn * nOut), g = random(n * nOut);
  const run = () => {
    const dW = new Float32Array(nIn * nOut).fill(0.5), db = new Float32Array(nOut), dx = new Float32Array(n * nIn);
    linearBackward(x, n, nIn, W, g, nOut, dW, db, dx);
    return { dW, db, dx };
  };
  const want = scalar(run), got = run();
  for (const key of ["dW", "db", "dx"]) assert.ok(maxDiff(got[key], want[key]) <= 1e-5, `${key}: ${maxDiff(got[key], want[key])}`);
});

/** The worst relative error of one gradient computation against the fixture's. */
function worstGradient(ref) {
  const model = new TinyGPT(ref.config, { params: ref.params });
  const logits = model.forward(Int32Array.from(ref.tokens), ref.B, ref.T);
  const dLogits = new model.Array(logits.length);
  crossEntropy(logits, Int32Array.from(ref.targets), model.config.n_vocab, dLogits);
  model.backward(dLogits);
  let largest = 0;
  for (const g of Object.values(ref.grads)) largest = Math.max(largest, maxAbs(g));
  let worst = 0;
  for (const [name, g] of Object.entries(ref.grads)) {
    worst = Math.max(worst, maxDiff(model.grads[name], g) / Math.max(maxAbs(g), 1e-2 * largest));
  }
  return worst;
}

for (const path of ["SIMD", "scalar"]) {
  const on = (f) => (path === "scalar" ? scalar(f) : f());
  for (const [kind, ref] of Object.entries(fixture.gradients)) {
    test(`${path} path, ${kind} positions: every gradient within 1e-4 of the library's`, () => {
      const worst = on(() => worstGradient(ref));
      assert.ok(worst <= 1e-4, `relative error ${worst}`);
    });
  }
  test(`${path} path: the 50-step run's losses within 1e-3 of the library's`, () => {
    const ref = fixture.training;
    const cfg = ref.config;
    const worst = on(() => {
      const model = new TinyGPT(cfg, { params: ref.params });
      const opt = new AdamW(model.params, { lr: cfg.lr, betas: cfg.betas });
      let w = 0;
      ref.batches.forEach(([x, y], i) => {
        const lr = learningRate(i + 1, { lr: cfg.lr, minLr: cfg.min_lr, warmup: cfg.warmup, steps: cfg.steps });
        const { loss } = trainStep(model, opt, Int32Array.from(x), Int32Array.from(y), cfg.batch, cfg.max_len, { clip: cfg.clip, lr });
        w = Math.max(w, Math.abs(loss - ref.losses[i]));
      });
      return w;
    });
    assert.ok(worst <= 1e-3, `a loss differs from the library's by ${worst}`);
  });
}

test("a wrong kernel is caught: dot_rows summing one product too few fails the gradient check", () => {
  const k = sharedKernels();
  const real = k.exports;
  // a stand-in dot_rows that drops the last row of B from every product
  k.exports = { ...real, dot_rows: (a, nA, b, nB, len, c) => real.dot_rows(a, nA, b, Math.max(1, nB - 1), len, c) };
  try {
    const worst = worstGradient(fixture.gradients.learned);
    assert.ok(worst > 1e-3, `the broken kernel was not caught: ${worst}`);
  } finally {
    k.exports = real;
  }
});

test("gelu_forward: y, Phi and phi within 1e-6 (absolute) of the scalar formulas, on -16 .. 16", () => {
  const n = 4096;
  const x = Float32Array.from({ length: n }, (_, i) => (i - n / 2) / 128); // -16 .. 16
  const run = () => {
    const y = new Float32Array(n), cdf = new Float32Array(n), pdf = new Float32Array(n);
    geluForward(x, y, cdf, pdf);
    return { y, cdf, pdf };
  };
  const want = scalar(run), got = run();
  for (const key of ["y", "cdf", "pdf"]) {
    // the erf formula itself is good to 1.5e-7; float32 arithmetic adds a rounding or two
    const err = maxDiff(got[key], want[key]);
    assert.ok(err <= 1e-6, `${key}: ${err}`);
  }
  assert.ok(maxDiff(got.y, want.y) > 0, "identical to the scalar path: is the kernel running?");
});
