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
/** Whether the SIMD kernels run (supported and not forced off). */
export function simdActive() {
  return SIMD_SUPPORTED && !forced;
}

let compiled = null;
function kernelModule() {
  if (!compiled) {
    const text = atob(KERNELS_WASM_BASE64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    compiled = new WebAssembly.Module(bytes); // 2 kB: small enough for a synchronous compile
  }
  return compiled;
}

const PAGE = 65536;
const OWNERS = new WeakMap(); // a memory's current ArrayBuffer -> its Kernels

/** The Kernels whose memory holds this array, or null (a plain array). */
export function kernelsFor(X) {
  return OWNERS.get(X.buffer) || null;
}
const ALIGN = 16; // bytes: a v128 per aligned load

/** One linear memory with the kernels instantiated on it, an arena and a scratch space. */
export class Kernels {
  constructor(bytes = PAGE) {
    this.memory = new WebAssembly.Memory({ initial: Math.max(1, Math.ceil(bytes / PAGE)) });
    this.exports = new WebAssembly.Instance(kernelModule(), { env: { memory: this.memory } }).exports;
    this.top = ALIGN; // the arena's end (address 0 left unused)
    this.listeners = [];
    OWNERS.set(this.memory.buffer, this);
  }

  /** Make room for `bytes` above the arena, growing the memory (and telling the listeners). */
  reserve(bytes) {
    const need = this.top + bytes;
    if (need > this.memory.buffer.byteLength) {
      this.memory.grow(Math.ceil((need - this.memory.buffer.byteLength) / PAGE));
      OWNERS.set(this.memory.buffer, this);
      for (const f of this.listeners) f(this.memory.buffer);
    }
  }

  /** n float32 in the arena, for good: {offset, view}. */
  alloc(n) {
    const bytes = Math.ceil((4 * n) / ALIGN) * ALIGN;
    this.reserve(bytes);
    const offset = this.top;
    this.top += bytes;
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
   * Byte addresses for a call: each array of `arrays` ([array, floats, copy] triples) that
   * lives here gives its own address; the others get scratch space above the arena, and
   * are copied into it when `copy`. Returns {at, held}. The addresses of the arrays that
   * live here are read before the scratch space may grow the memory (which detaches their
   * views); after that, only the addresses are used.
   */
  place(arrays) {
    const held = arrays.map(([X]) => this.holds(X));
    const at = arrays.map(([X], i) => (held[i] ? X.byteOffset : 0));
    let bytes = 0;
    for (let i = 0; i < arrays.length; i++) if (!held[i]) bytes += Math.ceil((4 * arrays[i][1]) / ALIGN) * ALIGN;
    this.reserve(bytes);
    const buffer = this.memory.buffer;
    let top = this.top;
    arrays.forEach(([X, n, copy], i) => {
      if (held[i]) return;
      at[i] = top;
      top += Math.ceil((4 * n) / ALIGN) * ALIGN;
      if (copy) new Float32Array(buffer, at[i], n).set(n === X.length ? X : X.subarray(0, n));
    });
    return { at, held };
  }

  /**
   * Scratch arrays above the arena for one call: sizes (floats) in, [{at, view}] out
   * (byte address and Float32Array view), valid until the next call that may grow memory.
   */
  scratch(sizes) {
    const padded = sizes.map((n) => Math.ceil((4 * n) / ALIGN) * ALIGN);
    this.reserve(padded.reduce((a, b) => a + b, 0));
    let at = this.top;
    return sizes.map((n, i) => {
      const r = { at, view: new Float32Array(this.memory.buffer, at, n) };
      at += padded[i];
      return r;
    });
  }

  /** The float32 view of n floats at a byte address. */
  view(address, n) {
    return new Float32Array(this.memory.buffer, address, n);
  }

  /**
   * C (nA, nB) = A (nA, len) B (nB, len)^T, or C += with `accumulate`: train-layers.mjs's
   * dotRows. Float32Array arguments only (the caller keeps Float64Array on its scalar path).
   */
  dotRows(A, nA, B, nB, len, C, accumulate = false) {
    const nC = nA * nB;
    const { at: [a, b, c], held } = this.place([[A, nA * len, true], [B, nB * len, true], [C, nC, accumulate]]);
    if (!accumulate) this.view(c, nC).fill(0);
    this.exports.dot_rows(a, nA, b, nB, len, c);
    if (!held[2]) C.set(this.view(c, nC));
    return C;
  }

  /** C (m, nOut) += A (n, m)^T B (n, nOut): a linear layer's dW = x^T g, no transposes. */
  dotCols(A, n, m, B, nOut, C) {
    const { at: [a, b, c], held } = this.place([[A, n * m, true], [B, n * nOut, true], [C, m * nOut, true]]);
    this.exports.dot_cols(a, n, m, b, nOut, c);
    if (!held[2]) C.set(this.view(c, m * nOut));
    return C;
  }

  /**
   * Attention of one query q (nHeads hd) over the first S rows of K and V (rows of nKv hd):
   * context = softmax(q k^T / sqrt(hd)) V per head, the softmax in JavaScript (Math.exp)
   * between the two kernels. Returns the weights' view (nHeads rows of S), valid until the
   * next call. Needs hd % 4 == 0.
   */
  attend(q, K, V, S, nHeads, nKv, hd, context, softmax) {
    const width = nKv * hd;
    const { at: [qa, ka, va, ca, pa], held } = this.place([
      [q, nHeads * hd, true], [K, S * width, true], [V, S * width, true], [context, nHeads * hd, false], [new Float32Array(0), nHeads * S, false],
    ]);
    this.exports.attend_scores(qa, ka, S, nHeads, nKv, hd, 1 / Math.sqrt(hd), pa);
    const P = this.view(pa, nHeads * S);
    for (let h = 0; h < nHeads; h++) softmax(P.subarray(h * S, (h + 1) * S), S);
    this.exports.attend_values(pa, va, S, nHeads, nKv, hd, ca);
    if (!held[3]) context.set(this.view(ca, nHeads * hd));
    return P;
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
