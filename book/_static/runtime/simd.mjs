// simd.mjs: the runtime's WebAssembly SIMD kernels (kernels.wat), with the scalar
// JavaScript as the fallback and the reference. No network: the module's bytes are in
// kernels-wasm.mjs (base64), assembled from kernels.wat by scripts/build_kernels.mjs.
//
// WebAssembly code reads and writes only its linear memory (one WebAssembly.Memory, a
// growable ArrayBuffer). A Kernels object owns one memory and an arena in it:
//   - alloc(n): n float32 that stay (a model's weights), as a Float32Array view;
//   - scratch: the space above the arena, into which the arguments that do not live in
//     the memory are copied for one call (and the results copied back).
// Growing a memory detaches every view of its old buffer (their length becomes 0). So a
// Kernels object re-views: `alloc` hands out views through `onGrow` callbacks, and the
// callers that keep views (transformer.mjs's accessors) refresh them; scratch views are
// made afresh on every call.
//
// setScalar(true) forces the scalar path everywhere (the tests run both paths; a reader
// can compare the speeds); SIMD_SUPPORTED says whether this engine validates SIMD.
import { KERNELS_WASM_BASE64 } from "./kernels-wasm.mjs";
import { halfTable } from "./quant.mjs";

/** The smallest module using a v128 instruction: (func (result v128) (v128.const i32x4 0 0 0 0)). */
const PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, // "\0asm", version 1
  1, 5, 1, 96, 0, 1, 123, // type section: one type, () -> v128
  3, 2, 1, 0, // function section: one function of type 0
  10, 22, 1, 20, 0, 253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11, // code: v128.const 0; end
]);

/** Whether this engine has WebAssembly with 128-bit SIMD. */
export const SIMD_SUPPORTED = (() => {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(PROBE);
  } catch {
    return false;
  }
})();

let forced = false;
/** Force the scalar JavaScript path (true) or allow SIMD again (false). */
export function setScalar(on) {
  forced = Boolean(on);
}
/** Run f() with the scalar path forced, then restore what was set before; f's result. */
export function withScalar(f) {
  const before = forced;
  forced = true;
  try {
    return f();
  } finally {
    forced = before;
  }
}
/** Whether the SIMD kernels run (supported, compiled, and not forced off). */
export function simdActive() {
  return !forced && kernelsAvailable();
}
/** Whether the kernels can run here (SIMD supported and the module compiled), forced off or not. */
export function kernelsAvailable() {
  return SIMD_SUPPORTED && kernelModule() !== null;
}

let compiled = null;
let pending = false;
function kernelBytes() {
  const text = atob(KERNELS_WASM_BASE64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}
/**
 * The compiled kernels, or null while they are not (yet) available. A synchronous compile
 * first; if the engine refuses it (Chromium, on a page's main thread, for modules over
 * 4 kB), an asynchronous one, and the scalar path until it is done.
 */
function kernelModule() {
  if (!compiled && !pending && SIMD_SUPPORTED) {
    try {
      compiled = new WebAssembly.Module(kernelBytes());
    } catch {
      pending = true;
      WebAssembly.compile(kernelBytes()).then((m) => (compiled = m), () => {});
    }
  }
  return compiled;
}

// Compile now, at import: in node and in workers the synchronous compile succeeds; on a
// page's main thread, where Chromium refuses to compile more than 4 kB synchronously, the
// asynchronous compile starts here, long before a reader's click loads a model.
kernelModule();

const PAGE = 65536;
const OWNERS = new WeakMap(); // a memory's current ArrayBuffer -> its Kernels

/** The Kernels whose memory holds this array, or null (a plain array). */
export function kernelsFor(X) {
  return OWNERS.get(X.buffer) || null;
}
const ALIGN = 16; // bytes: a v128 per aligned load
const pad = (n) => (4 * n + ALIGN - 1) & -ALIGN; // bytes for n floats, rounded up to ALIGN
const SMALL = 256; // copies shorter than this go element by element (no view allocated)

/** f[at .. at + n) = X[0 .. n). */
function copyIn(f, at, X, n) {
  if (n < SMALL) for (let i = 0; i < n; i++) f[at + i] = X[i];
  else f.set(n === X.length ? X : X.subarray(0, n), at);
}

/** X[0 .. n) = f[at .. at + n). */
function copyOut(f, at, X, n) {
  if (n < SMALL) for (let i = 0; i < n; i++) X[i] = f[at + i];
  else X.set(f.subarray(at, at + n));
}

/** One linear memory with the kernels instantiated on it, an arena and a scratch space. */
export class Kernels {
  constructor(bytes = PAGE) {
    this.memory = new WebAssembly.Memory({ initial: Math.max(1, Math.ceil(bytes / PAGE)) });
    const module = kernelModule();
    if (!module) throw new Error("the WebAssembly kernels are not compiled (see simdActive())");
    this.exports = new WebAssembly.Instance(module, { env: { memory: this.memory } }).exports;
    this.top = ALIGN; // the arena's end (address 0 left unused)
    this.listeners = [];
    this.f32 = new Float32Array(this.memory.buffer); // the whole memory, as floats
    OWNERS.set(this.memory.buffer, this);
  }

  /** Make room for `bytes` above the arena, growing the memory (and telling the listeners). */
  reserve(bytes) {
    const need = this.top + bytes;
    if (need > this.memory.buffer.byteLength) {
      this.memory.grow(Math.ceil((need - this.memory.buffer.byteLength) / PAGE));
      this.f32 = new Float32Array(this.memory.buffer);
      OWNERS.set(this.memory.buffer, this);
      for (const f of this.listeners) f(this.memory.buffer);
    }
  }

  /** n float32 in the arena, for good: {offset, view}. */
  alloc(n) {
    this.reserve(pad(n));
    const offset = this.top;
    this.top += pad(n);
    return { offset, view: new Float32Array(this.memory.buffer, offset, n) };
  }

  /** Call f(buffer) after every growth of the memory (to re-view arrays kept in the arena). */
  onGrow(f) {
    this.listeners.push(f);
  }

  /** Whether the array lives in this memory (then no copy is needed). */
  holds(X) {
    return X.buffer === this.memory.buffer;
  }

  /**
   * Scratch arrays above the arena for one call: sizes (floats) in, [{at, view}] out
   * (byte address and Float32Array view), valid until the next call that may grow memory.
   */
  scratch(sizes) {
    this.reserve(sizes.reduce((t, n) => t + pad(n), 0));
    let at = this.top;
    return sizes.map((n) => {
      const r = { at, view: new Float32Array(this.memory.buffer, at, n) };
      at += pad(n);
      return r;
    });
  }

  /**
   * The three operands of a product: the byte address of each, those that live here read
   * before anything grows the memory (a growth detaches their views; only their addresses
   * are used after it), the others given scratch space and copied in (C only when
   * `copyC`). Sets this.a, this.b, this.c and this.cHeld (no array allocated per call).
   */
  operands(A, nAl, B, nBl, C, nC, copyC) {
    const mem = this.memory.buffer;
    const aHeld = A.buffer === mem, bHeld = B.buffer === mem, cHeld = C.buffer === mem;
    let a = aHeld ? A.byteOffset : 0, b = bHeld ? B.byteOffset : 0, c = cHeld ? C.byteOffset : 0;
    this.reserve((aHeld ? 0 : pad(nAl)) + (bHeld ? 0 : pad(nBl)) + (cHeld ? 0 : pad(nC)));
    const f = this.f32;
    let top = this.top;
    if (!aHeld) {
      a = top;
      top += pad(nAl);
      copyIn(f, a >> 2, A, nAl);
    }
    if (!bHeld) {
      b = top;
      top += pad(nBl);
      copyIn(f, b >> 2, B, nBl);
    }
    if (!cHeld) {
      c = top;
      if (copyC) copyIn(f, c >> 2, C, nC);
    }
    this.a = a;
    this.b = b;
    this.c = c;
    this.cHeld = cHeld;
  }

  /**
   * C (nA, nB) = A (nA, len) B (nB, len)^T, or C += with `accumulate`: train-layers.mjs's
   * dotRows. Float32Array arguments only (the caller keeps Float64Array on its scalar path).
   */
  dotRows(A, nA, B, nB, len, C, accumulate = false) {
    const nC = nA * nB;
    this.operands(A, nA * len, B, nB * len, C, nC, accumulate);
    const c = this.c;
    if (!accumulate) this.f32.fill(0, c >> 2, (c >> 2) + nC);
    this.exports.dot_rows(this.a, nA, this.b, nB, len, c);
    if (!this.cHeld) copyOut(this.f32, c >> 2, C, nC);
    return C;
  }

  /** C (m, nOut) += A (n, m)^T B (n, nOut): a linear layer's dW = x^T g, no transposes. */
  dotCols(A, n, m, B, nOut, C) {
    this.operands(A, n * m, B, n * nOut, C, m * nOut, true);
    this.exports.dot_cols(this.a, n, m, this.b, nOut, this.c);
    if (!this.cHeld) copyOut(this.f32, this.c >> 2, C, m * nOut);
    return C;
  }

  /**
   * Attention of one query q (nHeads hd) over the first S rows of K and V (rows of nKv hd):
   * context = softmax(q k^T / sqrt(hd)) V per head: kernels.wat's attend_scores, softmax_rows
   * (e^x by a float32 polynomial: within a float32 rounding of Math.exp) and attend_values. Returns
   * the float address of the weights (nHeads rows of S in this.f32), valid until the next
   * call. Needs hd % 4 == 0.
   */
  attend(q, K, V, S, nHeads, nKv, hd, context) {
    const width = nKv * hd, nq = nHeads * hd, nkv = S * width;
    this.reserve(2 * pad(nq) + 2 * pad(nkv) + pad(nHeads * S));
    const f = this.f32;
    const qa = this.top, ka = qa + pad(nq), va = ka + pad(nkv), ca = va + pad(nkv), pa = ca + pad(nq);
    copyIn(f, qa >> 2, q, nq);
    copyIn(f, ka >> 2, K, nkv);
    copyIn(f, va >> 2, V, nkv);
    this.exports.attend_scores(qa, ka, S, nHeads, nKv, hd, 1 / Math.sqrt(hd), pa);
    this.exports.softmax_rows(pa, nHeads, S);
    this.exports.attend_values(pa, va, S, nHeads, nKv, hd, ca);
    copyOut(f, ca >> 2, context, nq);
    return pa >> 2;
  }

  /**
   * GELU of n floats (a multiple of 4) with its Phi and phi for the backward pass:
   * train-layers.mjs's geluForward on float32 (kernels.wat's gelu_forward).
   */
  gelu(x, y, cdf, pdf, n) {
    this.reserve(4 * pad(n));
    const f = this.f32, xa = this.top, ya = xa + pad(n), ca = ya + pad(n), pa = ca + pad(n);
    copyIn(f, xa >> 2, x, n);
    this.exports.gelu_forward(xa, ya, ca, pa, n);
    copyOut(f, ya >> 2, y, n);
    copyOut(f, ca >> 2, cdf, n);
    copyOut(f, pa >> 2, pdf, n);
  }

  /**
   * `bytes` (a Uint8Array: a GGUF file's quantized blocks) copied into the arena, for good:
   * their byte address. Their Uint8Array view would be detached by a growth of the memory,
   * so none is kept: the kernels read them by address (matvecGGML).
   */
  allocBytes(bytes) {
    const n = (bytes.length + ALIGN - 1) & -ALIGN;
    this.reserve(n);
    const offset = this.top;
    this.top += n;
    new Uint8Array(this.memory.buffer, offset, bytes.length).set(bytes);
    return offset;
  }

  /** The byte address of the float16 -> float32 table (65,536 floats) in the arena, made once. */
  halfAddress() {
    if (this.half === undefined) {
      const { offset, view } = this.alloc(65536);
      view.set(halfTable());
      this.half = offset;
    }
    return this.half;
  }

  /**
   * out (rows floats) = W x for a GGUF block matrix W (type "Q4_1" or "Q8_0", rows x cols)
   * kept in this memory at byte address w (allocBytes), x (cols floats) anywhere:
   * kernels.wat's matvec_q4_1 and matvec_q8_0. quant.mjs's matvecGGML is the reference.
   */
  matvecGGML(type, w, rows, cols, x, out) {
    const half = this.halfAddress();
    const [xs, sums, res] = this.scratch([cols, cols / 32, rows]);
    copyIn(xs.view, 0, x, cols);
    if (type === "Q4_1") this.exports.matvec_q4_1(w, rows, cols, xs.at, sums.at, half, res.at);
    else if (type === "Q8_0") this.exports.matvec_q8_0(w, rows, cols, xs.at, half, res.at);
    else throw new Error(`matvecGGML reads Q4_1 and Q8_0 blocks, not ${type}`);
    copyOut(res.view, 0, out, rows);
    return out;
  }

  /**
   * OUT (n rows of `rows`) = X W^T for n rows X (n rows of cols floats) and a GGUF block
   * matrix W at byte address w: for Q4_1, kernels.wat's matmul_q4_1 (each block unpacked
   * once for all n rows; every row's result the same floats as matvecGGML gives it alone);
   * otherwise matvecGGML row by row.
   */
  matmulGGML(type, w, rows, cols, X, n, out) {
    if (type !== "Q4_1" || n === 1) {
      for (let i = 0; i < n; i++) this.matvecGGML(type, w, rows, cols, X.subarray(i * cols, (i + 1) * cols), out.subarray(i * rows, (i + 1) * rows));
      return out;
    }
    const half = this.halfAddress();
    const [xs, sums, acc, macc, res] = this.scratch([n * cols, (n * cols) / 32, 4 * n, n, n * rows]);
    copyIn(xs.view, 0, X, n * cols);
    this.exports.matmul_q4_1(w, rows, cols, xs.at, n, sums.at, acc.at, macc.at, half, res.at);
    copyOut(res.view, 0, out, n * rows);
    return out;
  }

  /**
   * out (n, nOut) = X (n, nIn) W + b, W given as WT (nOut, nIn): transformer.mjs's
   * linearRows. Every output is one dot product (dot_rows), b (optional) added after.
   */
  linearRows(X, n, nIn, WT, b, out) {
    const nOut = WT.length / nIn;
    this.dotRows(X, n, WT, nOut, nIn, out);
    if (b) for (let r = 0; r < n; r++) for (let j = 0; j < nOut; j++) out[r * nOut + j] += b[j];
    return out;
  }
}

let shared = null;
/**
 * The kernels with no arena of their own: every call copies its arguments into scratch
 * space (training: the copies are a few per cent of a product's arithmetic). Null when
 * SIMD is missing or forced off.
 */
export function sharedKernels() {
  if (!simdActive()) return null;
  if (!shared) shared = new Kernels(1 << 20);
  return shared;
}
