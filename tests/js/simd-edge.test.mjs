// The SIMD kernels (kernels.wat) against the scalar JavaScript at the edges of float32:
// exponentials whose result is subnormal, NaN and infinities, the far negative tail of
// GELU, lengths that are not a multiple of 4.
//
//   node --test tests/js/simd-edge.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { Kernels, withScalar } from "../../book/_static/runtime/simd.mjs";
import { geluForward } from "../../book/_static/runtime/train-layers.mjs";

const kernels = new Kernels();
const TINY = 2 ** -149; // the smallest subnormal float32

/** kernels.wat's softmax_rows on one row. */
function simdSoftmax(row) {
  const [s] = kernels.scratch([row.length]);
  s.view.set(row);
  kernels.exports.softmax_rows(s.at, 1, row.length);
  return Float32Array.from(s.view);
}

/** The scalar softmax (transformer.mjs's softmaxInPlace) in double, stored as float32. */
function scalarSoftmax(row) {
  let max = -Infinity;
  for (const x of row) if (x > max) max = x;
  const e = Array.from(row, (x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return Float32Array.from(e, (x) => x / sum);
}

function simdGelu(x) {
  const n = x.length, y = new Float32Array(n), cdf = new Float32Array(n), pdf = new Float32Array(n);
  kernels.gelu(Float32Array.from(x), y, cdf, pdf, n);
  return { y, cdf, pdf };
}

function scalarGelu(x) {
  const n = x.length, y = new Float32Array(n), cdf = new Float32Array(n), pdf = new Float32Array(n);
  withScalar(() => geluForward(Float32Array.from(x), y, cdf, pdf));
  return { y, cdf, pdf };
}

test("softmax: weights in float32's subnormal range are e^x, not flushed to 0", () => {
  // scores 87.3 to 103 below the maximum: e^x between 2^-126 and 2^-149
  for (const S of [5, 8, 11]) {
    const row = Float32Array.from({ length: S }, (_, i) => (i === 0 ? 0 : -86 - (17 * i) / S));
    const got = simdSoftmax(row), want = scalarSoftmax(row);
    for (let i = 0; i < S; i++) {
      const err = Math.abs(got[i] - want[i]);
      assert.ok(err <= Math.max(2e-6 * want[i], 2 * TINY),
        `S=${S}, score ${row[i]}: SIMD ${got[i]}, scalar ${want[i]}`);
    }
  }
});

test("softmax: NaN and infinities give what the scalar softmax gives, at every length", () => {
  for (const S of [1, 2, 3, 4, 5, 7, 9]) {
    for (const [at, value] of [[0, NaN], [S - 1, NaN], [0, Infinity], [S - 1, -Infinity]]) {
      const row = Float32Array.from({ length: S }, (_, i) => (i === at ? value : 0.5 * i - 1));
      const got = simdSoftmax(row), want = scalarSoftmax(row);
      for (let i = 0; i < S; i++) {
        const same = Number.isNaN(want[i]) ? Number.isNaN(got[i]) : Math.abs(got[i] - want[i]) < 1e-6;
        assert.ok(same, `S=${S}, ${value} at ${at}: weight ${i} is ${got[i]}, the scalar's ${want[i]}`);
      }
    }
  }
});

test("GELU: NaN stays NaN in y, Phi and phi; infinities and subnormals as the scalar", () => {
  const x = [NaN, Infinity, -Infinity, 0, 1e-40, -1e-40, 3e-39, -TINY];
  const got = simdGelu(x), want = scalarGelu(x);
  for (const key of ["y", "cdf", "pdf"]) {
    for (let i = 0; i < x.length; i++) {
      const w = want[key][i], g = got[key][i];
      const same = Number.isNaN(w) ? Number.isNaN(g) : g === w || Math.abs(g - w) <= Math.max(1e-6 * Math.abs(w), TINY);
      assert.ok(same, `${key}(${x[i]}): SIMD ${g}, scalar ${w}`);
    }
  }
});

test("GELU: the far negative tail keeps its relative precision (no 1 - r cancellation)", () => {
  const x = Array.from({ length: 64 }, (_, i) => -2 - i / 8); // -2 to -9.9
  const got = simdGelu(x), want = scalarGelu(x);
  let worst = 0;
  for (let i = 0; i < x.length; i++) {
    if (want.cdf[i] < 1e-30) continue; // e^(-x^2/2) below float32's normal range
    worst = Math.max(worst, Math.abs(got.cdf[i] / want.cdf[i] - 1), Math.abs(got.y[i] / want.y[i] - 1));
  }
  assert.ok(worst < 1e-5, `largest relative difference of Phi or y: ${worst}`);
});
