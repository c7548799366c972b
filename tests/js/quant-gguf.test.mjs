// GGUF's quantized blocks in the browser runtime: Q4_1 and Q8_0 matrices kept as they are
// in WebAssembly memory, multiplied by a vector in kernels.wat (matvec_q4_1, matvec_q8_0),
// against the scalar JavaScript of quant.mjs (matvecGGML, the reference and the fallback):
//
//   - quant.mjs's weights are the format's (Q4_1: (qs[j] & 15) d + m, then qs[j] >> 4 for
//     number j + 16; Q8_0: q d), checked against codes packed here from the definition;
//   - the SIMD kernel equals the scalar product and dequantize-then-dot within float32
//     rounding, on awkward sizes and extreme codes and scales;
//   - a wrong kernel fails these checks: kernels.wat with the nibble order swapped, or the
//     minimum m dropped, is assembled here (wabt) and caught.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Kernels } from "../../book/_static/runtime/simd.mjs";
import { KERNELS_WASM_BASE64 } from "../../book/_static/runtime/kernels-wasm.mjs";
import { dequantizeGGML, ggmlRow, halfTable, matvecGGML } from "../../book/_static/runtime/quant.mjs";
import { makeRng } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const rng = makeRng(55);

/** float32 -> the bits of the nearest float16 (by search in the table: exact for test values). */
function toHalf(x) {
  const H = halfTable();
  let best = 0;
  for (let h = 0; h < 65536; h++) if (Number.isFinite(H[h]) && Math.abs(H[h] - x) < Math.abs(H[best] - x)) best = h;
  return best;
}
const HALF_CACHE = new Map();
const half = (x) => {
  if (!HALF_CACHE.has(x)) HALF_CACHE.set(x, toHalf(x));
  return HALF_CACHE.get(x);
};

/**
 * A random GGUF block matrix (rows x cols) of `type`, packed here from its definition, and
 * the float32 weights the definition gives: {bytes, weights}. Scales are drawn from a few
 * float16 values (tiny, subnormal, large; m negative and positive), codes from the whole range.
 */
function makeMatrix(type, rows, cols) {
  const size = { Q4_1: 20, Q8_0: 34 }[type];
  const bytes = new Uint8Array((rows * cols / 32) * size);
  const weights = new Float32Array(rows * cols);
  const H = halfTable();
  const scales = [0.0123, 0.5, 3e-6, 2.5, 0.0009765625, 7.0];
  const mins = [-0.1, -8 * 0.0123, 0.25, 0, -3.75];
  let at = 0;
  for (let r = 0; r < rows; r++) {
    for (let c0 = 0; c0 < cols; c0 += 32, at += size) {
      const dBits = half(scales[Math.floor(rng() * scales.length)]);
      const d = H[dBits];
      bytes[at] = dBits & 255;
      bytes[at + 1] = dBits >> 8;
      if (type === "Q4_1") {
        const mBits = half(mins[Math.floor(rng() * mins.length)]);
        const m = H[mBits];
        bytes[at + 2] = mBits & 255;
        bytes[at + 3] = mBits >> 8;
        const q = Array.from({ length: 32 }, (_, j) => (j % 11 === 0 ? (j % 2) * 15 : Math.floor(rng() * 16)));
        for (let j = 0; j < 16; j++) bytes[at + 4 + j] = q[j] | (q[j + 16] << 4);
        for (let j = 0; j < 32; j++) weights[r * cols + c0 + j] = Math.fround(Math.fround(q[j] * d) + m);
      } else {
        const q = Array.from({ length: 32 }, (_, j) => (j === 5 ? -128 : j === 6 ? 127 : Math.floor(rng() * 256) - 128));
        for (let j = 0; j < 32; j++) {
          bytes[at + 2 + j] = q[j] & 255;
          weights[r * cols + c0 + j] = Math.fround(q[j] * d);
        }
      }
    }
  }
  return { bytes, weights };
}

/** The products of the float32 weights with x, in double: dequantize-then-dot. */
function dequantDot(weights, rows, cols, x) {
  const out = new Float64Array(rows);
  const bound = new Float64Array(rows); // sum |w x|: the scale of float32 rounding
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < cols; j++) {
      out[r] += weights[r * cols + j] * x[j];
      bound[r] += Math.abs(weights[r * cols + j] * x[j]);
    }
  }
  return { out, bound };
}

/** Whether got agrees with the double-precision products within float32 rounding. */
function agrees(got, { out, bound }, cols) {
  for (let r = 0; r < out.length; r++) {
    if (!(Math.abs(got[r] - out[r]) <= 4e-7 * Math.sqrt(cols) * bound[r] + 1e-30)) return false;
  }
  return true;
}

const SIZES = [[1, 32], [3, 64], [17, 96], [8, 576], [5, 1536]];
const TYPES = ["Q4_1", "Q8_0"];

test("quant.mjs reads Q4_1 and Q8_0 blocks as the format defines them (low nibbles first, + m)", () => {
  for (const type of TYPES) {
    for (const [rows, cols] of SIZES) {
      const { bytes, weights } = makeMatrix(type, rows, cols);
      assert.deepEqual(dequantizeGGML(bytes, 0, type, rows, cols), weights, `${type} ${rows} x ${cols}`);
      assert.deepEqual(ggmlRow(bytes, 0, type, rows, cols, rows - 1), weights.subarray((rows - 1) * cols));
    }
  }
});

/** Run a kernel module's matvec (bytes: the assembled module) on one matrix; the outputs. */
function runModule(wasm, type, bytes, rows, cols, x) {
  const memory = new WebAssembly.Memory({ initial: 16 + Math.ceil((bytes.length + 4 * (2 * cols + rows)) / 65536) });
  const ex = new WebAssembly.Instance(new WebAssembly.Module(wasm), { env: { memory } }).exports;
  const u8 = new Uint8Array(memory.buffer);
  const half = 16, w = half + 4 * 65536, xa = w + ((bytes.length + 15) & -16), sums = xa + 4 * cols, out = sums + 4 * cols;
  new Float32Array(memory.buffer, half, 65536).set(halfTable());
  u8.set(bytes, w);
  new Float32Array(memory.buffer, xa, cols).set(x);
  if (type === "Q4_1") ex.matvec_q4_1(w, rows, cols, xa, sums, half, out);
  else ex.matvec_q8_0(w, rows, cols, xa, half, out);
  return Float32Array.from(new Float32Array(memory.buffer, out, rows));
}

const committed = Uint8Array.from(atob(KERNELS_WASM_BASE64), (c) => c.charCodeAt(0));

test("the SIMD kernels equal the scalar product and dequantize-then-dot, within float32 rounding", () => {
  const k = new Kernels();
  for (const type of TYPES) {
    for (const [rows, cols] of SIZES) {
      const { bytes, weights } = makeMatrix(type, rows, cols);
      const x = Float32Array.from({ length: cols }, () => (rng() - 0.5) * (rng() < 0.1 ? 100 : 1));
      const want = dequantDot(weights, rows, cols, x);
      const scalar = matvecGGML(bytes, 0, type, rows, cols, x);
      const w = k.allocBytes(bytes);
      const simd = k.matvecGGML(type, w, rows, cols, x, new Float32Array(rows));
      assert.ok(agrees(scalar, want, cols), `${type} ${rows} x ${cols}: scalar`);
      assert.ok(agrees(simd, want, cols), `${type} ${rows} x ${cols}: SIMD`);
      assert.ok(agrees(simd, { out: scalar, bound: want.bound }, cols), `${type} ${rows} x ${cols}: SIMD == scalar`);
      assert.deepEqual(runModule(committed, type, bytes, rows, cols, x), simd);
    }
  }
  // the weights stay where they were put: a later allocation (a growth) does not move them
  const { bytes } = makeMatrix("Q4_1", 2, 64);
  const w = k.allocBytes(bytes);
  k.alloc(1 << 20);
  assert.deepEqual(new Uint8Array(k.memory.buffer, w, bytes.length), bytes);
});

test("matmul_q4_1 (a prompt's rows at once) gives each row matvec_q4_1's floats, bit for bit", () => {
  const k = new Kernels();
  for (const [n, rows, cols] of [[2, 3, 64], [5, 17, 96], [7, 8, 576], [3, 5, 1536]]) {
    const { bytes } = makeMatrix("Q4_1", rows, cols);
    const w = k.allocBytes(bytes);
    const X = Float32Array.from({ length: n * cols }, () => rng() - 0.5);
    const batch = k.matmulGGML("Q4_1", w, rows, cols, X, n, new Float32Array(n * rows));
    for (let i = 0; i < n; i++) {
      const alone = k.matvecGGML("Q4_1", w, rows, cols, X.subarray(i * cols, (i + 1) * cols), new Float32Array(rows));
      assert.deepEqual(batch.subarray(i * rows, (i + 1) * rows), alone, `${n} x ${rows} x ${cols}, row ${i}`);
    }
  }
});

test("a wrong kernel is caught: the nibble order swapped, or the minimum m dropped", async (t) => {
  if (!existsSync(`${root}node_modules/wabt`)) {
    t.skip("wabt is not installed: run npm ci at the repository's root");
    return;
  }
  const { assemble } = await import("../../scripts/build_kernels.mjs");
  const source = readFileSync(`${root}book/_static/runtime/kernels.wat`, "utf8");
  const low = "(v128.and (local.get $q) (local.get $mask))";
  const high = "(i8x16.shr_u (local.get $q) (i32.const 4))";
  const plusM = "(local.set $macc (f32.add (local.get $macc) (f32.mul";
  // matvec_q4_1 and matmul_q4_1 unpack alike (each twice); matvec_q4_1 adds the m terms so
  assert.equal(source.split(low).length, 5, "kernels.wat unpacks the low nibbles as the test expects");
  assert.equal(source.split(high).length, 5);
  assert.equal(source.split(plusM).length, 2);
  const mutants = {
    "nibble order swapped": source.replaceAll(low, "@LOW@").replaceAll(high, low).replaceAll("@LOW@", high),
    "minimum dropped": source.replace(plusM, "(local.set $macc (f32.sub (local.get $macc) (f32.mul"),
  };
  const { bytes, weights } = makeMatrix("Q4_1", 8, 576);
  const x = Float32Array.from({ length: 576 }, () => rng() - 0.5);
  const want = dequantDot(weights, 8, 576, x);
  assert.ok(agrees(runModule(await assemble(source), "Q4_1", bytes, 8, 576, x), want, 576), "the source as committed agrees");
  for (const [what, text] of Object.entries(mutants)) {
    assert.notEqual(text, source);
    assert.equal(agrees(runModule(await assemble(text), "Q4_1", bytes, 8, 576, x), want, 576), false, `${what}: not caught`);
  }
});

test("bad matrices are refused in one line before anything is read", () => {
  const { bytes } = makeMatrix("Q4_1", 2, 64);
  assert.throws(() => matvecGGML(bytes, 0, "Q4_1", 3, 64, new Float32Array(64)), /a Q4_1 matrix of 3 x 64 at byte 0 ends at byte 120, past the 80 bytes given/);
  assert.throws(() => dequantizeGGML(bytes, 0, "Q4_1", 2, 48), /a Q4_1 row must be a positive multiple of 32 numbers, got 48/);
  assert.throws(() => dequantizeGGML(bytes, 0, "Q5_K", 2, 64), /ggml type Q5_K is not a block type the runtime reads/);
  assert.throws(() => new Kernels().matvecGGML("Q4_0", 0, 1, 32, new Float32Array(32), new Float32Array(1)), /matvecGGML reads Q4_1 and Q8_0 blocks, not Q4_0/);
});
