// transformer.mjs: the book's Transformers, run in the reader's browser (or in node).
//
// One ES module, no dependencies, written to be read after chapters 9 to 13.
// It runs the forward pass of the book's trained models one token at a time
// with a KV cache, in Float32Arrays:
//
//   - decoder-only models: the Shakespeare TinyGPT (LayerNorm, GELU, learned
//     positions) and stories260K (RMSNorm, SwiGLU, rotary positions,
//     grouped-query attention), one code path with switches;
//   - the encoder-decoder translator (sinusoidal positions, cross-attention);
//   - greedy decoding, sampling (temperature, top-k, top-p, a seeded PRNG)
//     and beam search;
//   - the tokenizers: characters, llama2.c's SentencePiece-style merges, and
//     a byte-pair encoder read from a Hugging Face `tokenizers` JSON file.
//
// API (what the project's checks call from node):
//   const model = loadModel(manifest, weights)   // parsed JSON, ArrayBuffer: checked against
//                                                // the manifest (size, SHA-256, shapes, finite)
//   model.tokenizer.encode(text) -> ids, model.tokenizer.decode(ids) -> text,
//   model.tokenizer.streamDecoder() -> {push(id) -> new text, flush()}
//   model.generate(promptIds, maxNewTokens, {temperature, topK, topP, seed, crop}) -> new ids
//       (past max_len the context is cropped as the library crops it; crop: false refuses)
//   model.steps(...) yields one token at a time, with its logits and, when asked
//   ({attention: true}), the attention weights of every layer and head;
//   distribution(logits, {temperature, topK, topP}) -> {ids, probs}: what the sampler draws from
//   model.translate(text, {beam}) -> text, model.translateMany(texts, {beam}) -> texts
//       (translator only: greedy, or the library's beam search; sentences decoded together,
//       each exactly as if alone).
//
// Weights stored in 8 or 4 bits are dequantized on load by quant.mjs.
import { QUANT_TYPES, dequantize, quantizedBytes } from "./quant.mjs";
import { Kernels, kernelsAvailable, kernelsFor, sharedKernels, simdActive } from "./simd.mjs";

// Matrices are stored row-major as (n_in, n_out), the library's `x @ W`
// convention (scripts/export_models.py writes them so), whatever the source.

// ---------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------

/** IEEE half -> float32, for weights exported as float16. */
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24; // subnormal
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

let HALF_TABLE = null; // all 65,536 halves, converted once: decoding is then a lookup

const BYTES = { float16: 2, float32: 4 };

/**
 * The tensors of a manifest as Float32Arrays: {name: {data, shape}}. Every entry is checked
 * against the file before anything is allocated (a claimed shape cannot make the reader
 * allocate more than the file holds), and every value must be finite.
 */
export function readTensors(manifest, buffer) {
  const view = new DataView(buffer);
  const entries = Object.entries(manifest.tensors);
  for (const [name, t] of entries) {
    if (!t || typeof t !== "object" || !Array.isArray(t.shape)) {
      throw new Error(`tensor ${name}: the manifest gives no shape`);
    }
    if (!t.shape.every((n) => Number.isInteger(n) && n >= 1)) {
      throw new Error(`tensor ${name}: its shape must be positive integers, got [${t.shape}]`);
    }
    if (!(t.dtype in BYTES) && !(t.dtype in QUANT_TYPES)) {
      throw new Error(`tensor ${name}: dtype must be float16, float32, q8_0 or q4_0, got ${t.dtype}`);
    }
    if (!(Number.isInteger(t.offset) && t.offset >= 0)) {
      throw new Error(`tensor ${name}: its offset must be an integer >= 0, got ${t.offset}`);
    }
    const n = t.shape.reduce((a, b) => a * b, 1);
    const size = t.dtype in QUANT_TYPES ? quantizedBytes(name, t) : n * BYTES[t.dtype];
    if (t.offset + size > buffer.byteLength) {
      throw new Error(`tensor ${name} (shape [${t.shape}]) lies past the end of the weights (${buffer.byteLength} bytes)`);
    }
  }
  const tensors = {};
  for (const [name, t] of entries) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const data = t.dtype in QUANT_TYPES ? dequantize(view, name, t) : new Float32Array(n);
    if (t.dtype === "float16") {
      if (!HALF_TABLE) HALF_TABLE = Float32Array.from({ length: 65536 }, (_, h) => halfToFloat(h));
      for (let i = 0; i < n; i++) data[i] = HALF_TABLE[view.getUint16(t.offset + 2 * i, true)];
    } else if (t.dtype === "float32") {
      for (let i = 0; i < n; i++) data[i] = view.getFloat32(t.offset + 4 * i, true);
    }
    let bad = 0;
    for (let i = 0; i < n; i++) if (!Number.isFinite(data[i])) bad += 1;
    if (bad) throw new Error(`tensor ${name} holds ${bad} values that are NaN or infinite: the weights are damaged`);
    tensors[name] = { data, shape: t.shape };
  }
  return tensors;
}

/**
 * Compare every tensor a model reads with the shape its configuration implies, before the
 * model is built: a missing, extra-sized or misnamed tensor is named in the error.
 * expected: {name: shape}; optional: names that may be absent (biases, for one).
 */
function checkShapes(tensors, expected, optional = new Set()) {
  for (const [name, shape] of Object.entries(expected)) {
    const t = tensors[name];
    if (!t) {
      if (optional.has(name)) continue;
      throw new Error(`the weights have no tensor ${name} (shape [${shape}] expected from the configuration)`);
    }
    if (t.shape.length !== shape.length || t.shape.some((n, i) => n !== shape[i])) {
      throw new Error(`tensor ${name} has shape [${t.shape}], but the configuration implies [${shape}]`);
    }
  }
}

/** A positive integer setting of a configuration, or an error naming it. */
function configInt(config, key, min = 1) {
  const v = config[key];
  if (!(Number.isInteger(v) && v >= min)) throw new Error(`config.${key} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return v;
}

// SHA-256 (FIPS 180-4) in plain JavaScript, synchronous, so that loadModel can check the
// weights in every browser (WebCrypto's digest is async and absent outside secure contexts).
const SHA_K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** SHA-256 of bytes (an ArrayBuffer or a typed array) as 64 hex digits. */
export function sha256Hex(bytes) {
  const src = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = src.length;
  const full = n - (n % 64); // whole blocks are read in place; the tail is padded in a copy
  const tail = new Uint8Array(n - full + 9 <= 64 ? 64 : 128);
  tail.set(src.subarray(full));
  tail[n - full] = 0x80;
  const tv = new DataView(tail.buffer);
  tv.setUint32(tail.length - 8, Math.floor(n / 2 ** 29), false);
  tv.setUint32(tail.length - 4, (n * 8) >>> 0, false);
  const H = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const K = SHA_K;
  const w = new Int32Array(64);
  const block = (buf, off) => {
    for (let i = 0; i < 16; i++) {
      const j = off + 4 * i;
      w[i] = (buf[j] << 24) | (buf[j + 1] << 16) | (buf[j + 2] << 8) | buf[j + 3];
    }
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15];
      const y = w[i - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0;
      d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    H[0] += a; H[1] += b; H[2] += c; H[3] += d; H[4] += e; H[5] += f; H[6] += g; H[7] += h;
  };
  for (let off = 0; off < full; off += 64) block(src, off);
  for (let off = 0; off < tail.length; off += 64) block(tail, off);
  return Array.from(H, (x) => (x >>> 0).toString(16).padStart(8, "0")).join("");
}

// ---------------------------------------------------------------------------
// The pieces of a block, on rows (one row a position)
// ---------------------------------------------------------------------------

/** One dot product of X[x..x+n) and W[w..w+n), summed in double precision over four accumulators. */
function dot4(X, x, W, w, n) {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    s0 += X[x + i] * W[w + i];
    s1 += X[x + i + 1] * W[w + i + 1];
    s2 += X[x + i + 2] * W[w + i + 2];
    s3 += X[x + i + 3] * W[w + i + 3];
  }
  for (; i < n; i++) s0 += X[x + i] * W[w + i];
  return s0 + s1 + (s2 + s3);
}

/**
 * Two dot products that share one operand, S[s..s+n) . P[p..p+n) and S[s..s+n) . P[q..q+n),
 * each summed in double precision over four accumulators exactly as dot4() sums, written
 * to out[o1] and out[o2] with the biases b1 and b2. Each read of S serves both products:
 * linearRows() calls it with two rows of X against one row of W^T (a batch), or with one
 * row of X against two rows of W^T (a single token).
 */
function dot2(S, s, P, p, q, n, out, o1, b1, o2, b2) {
  let a0 = 0;
  let a1 = 0;
  let a2 = 0;
  let a3 = 0;
  let c0 = 0;
  let c1 = 0;
  let c2 = 0;
  let c3 = 0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    const s0 = S[s + i];
    const s1 = S[s + i + 1];
    const s2 = S[s + i + 2];
    const s3 = S[s + i + 3];
    a0 += P[p + i] * s0;
    a1 += P[p + i + 1] * s1;
    a2 += P[p + i + 2] * s2;
    a3 += P[p + i + 3] * s3;
    c0 += P[q + i] * s0;
    c1 += P[q + i + 1] * s1;
    c2 += P[q + i + 2] * s2;
    c3 += P[q + i + 3] * s3;
  }
  for (; i < n; i++) {
    a0 += P[p + i] * S[s + i];
    c0 += P[q + i] * S[s + i];
  }
  out[o1] = a0 + a1 + (a2 + a3) + b1;
  out[o2] = c0 + c1 + (c2 + c3) + b2;
}

/**
 * out = X W + b for n rows X (n x nIn, row-major) and W (nIn, nOut), given as WT = W^T
 * (nOut rows of nIn: see transposed()), b optional; out holds n rows of nOut. Each output is
 * one dot product over two contiguous rows, summed in double precision over four
 * accumulators (independent sums keep the CPU's pipelines busy; at least as accurate as
 * float32). Rows of X go two at a time, so that each weight read serves both, and every
 * row of W^T is read once per pair while it is in the cache; a row left over (a single
 * token: the decoding step) goes two outputs at a time, each read of x serving both (both
 * through dot2()). A row's sums are the same whatever n is and whichever row it pairs
 * with: batching never changes a result.
 */
function linearRows(X, n, nIn, WT, b, out) {
  // WebAssembly SIMD when the weights live in the kernels' memory (accessors() puts them
  // there): simd.mjs, kernels.wat's dot_rows; the loops below are the fallback
  const kernels = simdActive() ? kernelsFor(WT) : null;
  if (kernels) return kernels.linearRows(X, n, nIn, WT, b, out);
  const nOut = WT.length / nIn;
  let r = 0;
  for (; r + 1 < n; r += 2) {
    const x = r * nIn;
    const o = r * nOut;
    for (let j = 0; j < nOut; j++) {
      const bias = b ? b[j] : 0;
      dot2(WT, j * nIn, X, x, x + nIn, nIn, out, o + j, bias, o + nOut + j, bias);
    }
  }
  if (r < n) {
    const x = r * nIn;
    const o = r * nOut;
    let j = 0;
    for (; j + 1 < nOut; j += 2) {
      const w = j * nIn;
      dot2(X, x, WT, w, w + nIn, nIn, out, o + j, b ? b[j] : 0, o + j + 1, b ? b[j + 1] : 0);
    }
    for (; j < nOut; j++) out[o + j] = dot4(X, x, WT, j * nIn, nIn) + (b ? b[j] : 0);
  }
  return out;
}

/** out = x W + b for one row x: linearRows with n = 1. */
function linear(x, WT, b, out) {
  return linearRows(x, 1, x.length, WT, b, out);
}

/** W (n_in, n_out), row-major, as W^T (n_out, n_in): the layout linearRows() reads. */
function transposed({ data, shape }) {
  const [nIn, nOut] = shape;
  const WT = new Float32Array(data.length);
  for (let i = 0; i < nIn; i++) for (let j = 0; j < nOut; j++) WT[j * nIn + i] = data[i * nOut + j];
  return WT;
}

/**
 * Accessors for a model's tensors: t(name) as stored, m(name) a matrix transposed for
 * linear(), r(name) a matrix as stored that linear() reads (a tied output layer). Where
 * the engine has WebAssembly SIMD, m() and r() live in the kernels' memory (simd.mjs), so
 * that linearRows() runs them with no copy; after a growth of that memory, they are
 * re-viewed (callers fetch them afresh at every use).
 */
function accessors(tensors) {
  const cache = new Map(); // name -> {offset, n, view}: the matrices linear() reads
  let kernels = null;
  if (kernelsAvailable()) {
    let floats = 0;
    for (const t of Object.values(tensors)) if (t.shape.length === 2) floats += t.data.length + 4;
    kernels = new Kernels(4 * floats + (1 << 20)); // the matrices, and 1 MB of scratch
    kernels.onGrow((buffer) => {
      for (const [name, e] of cache) cache.set(name, { ...e, view: new Float32Array(buffer, e.offset, e.n) });
    });
  }
  const place = (key, make) => {
    if (!cache.has(key)) {
      const data = make();
      if (kernels) {
        const { offset, view } = kernels.alloc(data.length);
        view.set(data);
        cache.set(key, { offset, n: data.length, view });
      } else cache.set(key, { view: data });
    }
    return cache.get(key).view;
  };
  const t = (name) => (tensors[name] ? tensors[name].data : null);
  const need = (name) => {
    if (!tensors[name]) throw new Error(`the weights have no tensor ${name}`);
    return tensors[name];
  };
  const m = (name) => place(name, () => transposed(need(name)));
  const r = (name) => place(`${name} as stored`, () => need(name).data);
  return { t, m, r };
}

/** Row r (length d) of a flat array of rows, as a view. */
const row = (A, r, d) => A.subarray(r * d, (r + 1) * d);

/** LayerNorm: (x - mean) / sqrt(var + eps) * gamma + beta (biased variance). */
function layerNorm(x, gamma, beta, eps, out) {
  const d = x.length;
  let mean = 0;
  for (let i = 0; i < d; i++) mean += x[i];
  mean /= d;
  let variance = 0;
  for (let i = 0; i < d; i++) variance += (x[i] - mean) ** 2;
  const inv = 1 / Math.sqrt(variance / d + eps);
  for (let i = 0; i < d; i++) out[i] = (x[i] - mean) * inv * gamma[i] + (beta ? beta[i] : 0);
  return out;
}

/** RMSNorm (Llama): x / sqrt(mean(x^2) + eps) * weight; no centring, no shift. */
/** BPE's merge loop, in place on ``parts`` (symbols): join the adjacent pair of best
 * (lowest) rank in ``ranks`` ("left right" -> rank), again and again, until no adjacent
 * pair has one. The translator's subword tokenizer and SmolLM2's byte-level one share it. */
export function mergeByRank(parts, ranks) {
  for (;;) {
    let best = Infinity;
    let at = -1;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = ranks.get(parts[i] + " " + parts[i + 1]);
      if (r !== undefined && r < best) {
        best = r;
        at = i;
      }
    }
    if (at < 0) return parts;
    parts.splice(at, 2, parts[at] + parts[at + 1]);
  }
}

export function rmsNorm(x, weight, eps, out) {
  const d = x.length;
  let ms = 0;
  for (let i = 0; i < d; i++) ms += x[i] * x[i];
  const inv = 1 / Math.sqrt(ms / d + eps);
  for (let i = 0; i < d; i++) out[i] = x[i] * inv * weight[i];
  return out;
}

/**
 * erf, to within 1.5e-7 (Abramowitz and Stegun 7.1.26), far below float32's rounding of
 * the GELU it feeds. JavaScript has no Math.erf.
 */
export function erf(x) {
  const a = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * a);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const y = 1 - poly * Math.exp(-a * a);
  return x < 0 ? -y : y;
}

/** GELU, exact: x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (the library's default). */
function gelu(x) {
  for (let i = 0; i < x.length; i++) x[i] = 0.5 * x[i] * (1 + erf(x[i] * Math.SQRT1_2));
  return x;
}

/** SiLU (swish), SwiGLU's gate: x sigmoid(x). */
export function silu(v) {
  return v / (1 + Math.exp(-v));
}

/** Softmax of the first n entries of x, in place (subtract the max first). */
function softmaxInPlace(x, n = x.length) {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[i] > max) max = x[i];
  let sum = 0;
  for (let i = 0; i < n; i++) {
    x[i] = Math.exp(x[i] - max);
    sum += x[i];
  }
  for (let i = 0; i < n; i++) x[i] /= sum;
  return x;
}

/** The sinusoidal position vector of position p (chapter 7): sin on even features, cos on odd. */
function sinusoid(p, d, base = 10000) {
  const pe = new Float32Array(d);
  for (let i = 0; i < d; i += 2) {
    const angle = p / base ** (i / d);
    pe[i] = Math.sin(angle);
    if (i + 1 < d) pe[i + 1] = Math.cos(angle);
  }
  return pe;
}

/**
 * Rotate one head's query or key (length hd, starting at `start` in `x`) by position p.
 * "interleaved": features (2i, 2i+1) form a pair (the library's `rotary`, RoFormer, Llama's
 * original weights); "half": feature i pairs with i + hd/2 (GPT-NeoX, Hugging Face's Llama).
 * Pair i turns by the angle p * base^(-2i/hd) in both layouts.
 */
export function rotate(x, start, hd, p, layout, base) {
  const half = hd / 2;
  const { cos, sin } = rotaryRow(hd, base, p);
  for (let i = 0; i < half; i++) {
    const c = cos[i];
    const s = sin[i];
    const a = layout === "half" ? start + i : start + 2 * i;
    const b = layout === "half" ? start + i + half : start + 2 * i + 1;
    const xa = x[a];
    const xb = x[b];
    x[a] = xa * c - xb * s;
    x[b] = xa * s + xb * c;
  }
}

const ROTARY = new Map(); // "hd base" -> the cos and sin rows of the positions met so far

/** cos and sin (hd / 2 each) of position p's angles p base^(-2i/hd), computed once. */
function rotaryRow(hd, base, p) {
  const key = `${hd} ${base}`;
  let rows = ROTARY.get(key);
  if (!rows) ROTARY.set(key, (rows = []));
  if (!rows[p]) {
    const half = hd / 2;
    const cos = new Float64Array(half);
    const sin = new Float64Array(half);
    for (let i = 0; i < half; i++) {
      const angle = p * base ** ((-2 * i) / hd);
      cos[i] = Math.cos(angle);
      sin[i] = Math.sin(angle);
    }
    rows[p] = { cos, sin };
  }
  return rows[p];
}

// ---------------------------------------------------------------------------
// Attention with a KV cache
// ---------------------------------------------------------------------------

/**
 * The keys and values one attention layer has seen: rows of nKv * hd floats,
 * appended one position at a time (chapter 11's KV cache, in a flat array).
 */
export class KVCache {
  constructor(maxLen, width, capacity = Math.min(maxLen, 16)) {
    this.k = new Float32Array(capacity * width);
    this.v = new Float32Array(capacity * width);
    this.width = width;
    this.length = 0;
    this.maxLen = maxLen;
  }

  append(k, v) {
    if (this.length >= this.maxLen) throw new Error(`the KV cache is full (${this.maxLen} positions)`);
    if ((this.length + 1) * this.width > this.k.length) {
      // grow by doubling (a beam copies its hypotheses' caches: short ones copy fast)
      const rows = Math.min(this.maxLen, Math.max(16, 2 * this.length));
      const k = new Float32Array(rows * this.width);
      const v = new Float32Array(rows * this.width);
      k.set(this.k.subarray(0, this.length * this.width));
      v.set(this.v.subarray(0, this.length * this.width));
      this.k = k;
      this.v = v;
    }
    this.k.set(k, this.length * this.width);
    this.v.set(v, this.length * this.width);
    this.length += 1;
  }

  clone() {
    const c = new KVCache(this.maxLen, this.width, Math.min(this.maxLen, this.length + 8));
    c.k.set(this.k.subarray(0, this.length * this.width));
    c.v.set(this.v.subarray(0, this.length * this.width));
    c.length = this.length;
    return c;
  }
}

/**
 * Attention of one query row q (nHeads * hd) over the first S rows of a cache (all of them
 * by default; fewer for the earlier rows of a prompt run at once: causal attention).
 * Grouped-query attention: query head h reads key/value head floor(h / (nHeads / nKv)),
 * so nKv = nHeads is ordinary multi-head attention and nKv = 1 multi-query attention.
 * Returns the context (nHeads * hd) and, when `weightsOut` is given, pushes into it
 * each head's weights over the S positions (nHeads rows of S).
 */
export function attend(q, cache, nHeads, nKv, hd, context, weightsOut, S = cache.length) {
  // WebAssembly SIMD (simd.mjs: scores and weighted sum in kernels.wat, this softmax between)
  const kernels = hd % 4 === 0 ? sharedKernels() : null;
  if (kernels) {
    const p = kernels.attend(q, cache.k, cache.v, S, nHeads, nKv, hd, context);
    if (weightsOut) for (let h = 0; h < nHeads; h++) weightsOut.push(kernels.f32.slice(p + h * S, p + (h + 1) * S));
    return context;
  }
  const group = nHeads / nKv;
  const scale = 1 / Math.sqrt(hd);
  const width = nKv * hd;
  const scores = new Float32Array(S);
  const K = cache.k;
  const V = cache.v;
  context.fill(0);
  for (let h = 0; h < nHeads; h++) {
    const kvOff = Math.floor(h / group) * hd;
    const qOff = h * hd;
    for (let s = 0; s < S; s++) {
      let dot = 0;
      const kRow = s * width + kvOff;
      for (let i = 0; i < hd; i++) dot += q[qOff + i] * K[kRow + i];
      scores[s] = dot * scale;
    }
    softmaxInPlace(scores, S);
    for (let s = 0; s < S; s++) {
      const w = scores[s];
      const vRow = s * width + kvOff;
      for (let i = 0; i < hd; i++) context[qOff + i] += w * V[vRow + i];
    }
    if (weightsOut) weightsOut.push(Float32Array.from(scores));
  }
  return context;
}

// ---------------------------------------------------------------------------
// Decoding: greedy, sampling, a seeded PRNG
// ---------------------------------------------------------------------------

/** A seeded PRNG (mulberry32): the same seed gives the same numbers in every browser. */
export function makeRng(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Index of the largest logit (the first one on a tie, as NumPy's argmax). */
export function argmax(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/**
 * The distribution the sampler draws from: softmax(logits / temperature) restricted to the
 * topK most likely tokens and then to the smallest set whose probability reaches topP
 * (nucleus sampling; the most likely token is always kept, as in torch/transformers).
 * Returns {ids, probs}: the kept token ids, most likely first, and their probabilities,
 * renormalised to sum to 1 (the widget's probability bar shows them). temperature 0:
 * the most likely token alone. A temperature so small that logits / temperature overflows
 * (1e-320, say) is refused, naming the argument, as the library refuses it.
 */
export function distribution(logits, { temperature = 1, topK = 0, topP = 1 } = {}) {
  if (!(temperature > 0)) return { ids: [argmax(logits)], probs: [1] };
  const V = logits.length;
  const scaled = new Float64Array(V);
  for (let i = 0; i < V; i++) {
    scaled[i] = logits[i] / temperature;
    if (!Number.isFinite(scaled[i])) {
      throw new RangeError(`temperature ${temperature} is too small: logits / temperature is not finite ` +
        `(${logits[i]} / ${temperature}); use a larger temperature, or 0 for greedy decoding`);
    }
  }
  const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => scaled[b] - scaled[a] || a - b);
  const keep = topK > 0 ? Math.min(topK, V) : V;
  const probs = new Float64Array(keep);
  for (let r = 0; r < keep; r++) probs[r] = scaled[order[r]];
  softmaxInPlace(probs);
  let n = keep;
  if (topP < 1) {
    let cum = 0;
    for (let r = 0; r < keep; r++) {
      cum += probs[r];
      if (cum >= topP) {
        n = r + 1;
        break;
      }
    }
  }
  // tokens whose probability underflowed to 0 can never be drawn: leave them out
  while (n > 1 && probs[n - 1] === 0) n -= 1;
  let total = 0;
  for (let r = 0; r < n; r++) total += probs[r];
  return { ids: order.slice(0, n), probs: Array.from(probs.subarray(0, n), (p) => p / total) };
}

/**
 * The next token from logits: greedy when temperature is 0, else drawn from distribution()
 * by the inverse of its cumulative sum at a uniform u in [0, 1). Whatever u is (0, or the
 * largest double below 1), the token drawn has a probability above 0.
 */
export function pickToken(logits, options = {}, rng = Math.random) {
  if (!((options.temperature ?? 1) > 0)) return argmax(logits);
  const { ids, probs } = distribution(logits, options);
  let u = rng();
  for (let r = 0; r < ids.length; r++) {
    u -= probs[r];
    if (u < 0) return ids[r];
  }
  return ids[ids.length - 1]; // u rounded past the total: the last kept token (probability > 0)
}

function checkOptions({ temperature = 1, topK = 0, topP = 1, seed = 0 } = {}) {
  if (!(Number.isFinite(temperature) && temperature >= 0)) {
    throw new RangeError(`temperature must be a number >= 0, got ${temperature}`);
  }
  if (!(Number.isInteger(topK) && topK >= 0)) {
    throw new RangeError(`topK must be an integer >= 0 (0: no limit), got ${topK}`);
  }
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`topP must be in (0, 1], got ${topP}`);
  if (!(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32)) {
    throw new RangeError(`seed must be an integer in [0, 2^32), got ${seed}`);
  }
  return { temperature, topK, topP, seed };
}

// ---------------------------------------------------------------------------
// Head switches: a head's output set to zero before the output projection
// ---------------------------------------------------------------------------

/**
 * Switch off the heads `heads` of a decoder (DecoderLM or SmolLM2): from the next forward
 * pass on, their outputs (each head's d_head numbers of the context, before W_O) are zero in
 * every position, as the library's zero ablation (attention_lib.interp.ablate_heads with
 * how="zero", Llama.ablate) removes them; their attention weights are still computed (and
 * drawn). `heads`: [layer, head] pairs or "layer:head" keys, counted from 0 (a query head, with
 * grouped-query attention); an empty list switches every head back on. Every pair is checked
 * before the model changes: a bad one throws a RangeError naming it and the model keeps
 * the heads it had. Returns the model's new set of "layer:head" keys.
 */
export function setZeroHeads(model, heads) {
  const { n_layers: L, n_heads: H } = model.config;
  if (typeof heads === "string" || !heads || typeof heads[Symbol.iterator] !== "function") {
    throw new TypeError(`heads must be a list of [layer, head] pairs, got ${JSON.stringify(heads) ?? String(heads)}`);
  }
  const keys = new Set();
  for (const pair of heads) {
    const parts = typeof pair === "string" ? pair.split(":").map((v) => (/^\d+$/.test(v) ? Number(v) : NaN)) : pair;
    const ok = Array.isArray(parts) && parts.length === 2 && parts.every((v) => Number.isInteger(v) && v >= 0);
    if (!ok) throw new RangeError(`heads must be [layer, head] pairs of whole numbers, got ${JSON.stringify(pair)}`);
    const [l, h] = parts;
    if (l >= L || h >= H) {
      throw new RangeError(`(layer, head) = (${l}, ${h}) is outside this model's ${L} layers of ${H} heads (both counted from 0)`);
    }
    keys.add(`${l}:${h}`);
  }
  model.zeroHeads = keys;
  return keys;
}

/** Zero, in n rows of the context C (n x d), the outputs of layer l's heads switched off. */
export function zeroSwitchedOff(zeroHeads, l, nHeads, hd, C, n, d) {
  if (!zeroHeads || !zeroHeads.size) return;
  for (let h = 0; h < nHeads; h++) {
    if (!zeroHeads.has(`${l}:${h}`)) continue;
    for (let r = 0; r < n; r++) C.fill(0, r * d + h * hd, r * d + (h + 1) * hd);
  }
}

// ---------------------------------------------------------------------------
// Decoder-only models (GPT and Llama)
// ---------------------------------------------------------------------------

/**
 * A decoder-only Transformer. config:
 *   n_vocab, d_model, n_heads, n_kv_heads, n_layers, d_ff, max_len,
 *   norm: "layernorm" | "rmsnorm", norm_eps,
 *   ffn: "gelu" (fc1, GELU, fc2) | "swiglu" (w2(silu(x w1) * (x w3))),
 *   positions: "learned" | "sinusoidal" | "rotary" | null,
 *   rotary_layout: "interleaved" | "half", rotary_base,
 *   tied_head: the output projection is the token embedding, transposed.
 * Tensor names: tok_emb (V, d); pos_emb (max_len, d); layers.i.norm1.weight/.bias;
 * layers.i.attn.wq/wk/wv/wo (+ bq, bk, bv, bo); layers.i.norm2.*; layers.i.ffn.w1/b1,
 * w2/b2, w3; norm_f.weight/.bias; head.weight (d, V), head.bias.
 */
export class DecoderLM {
  constructor(config, tensors, tokenizer) {
    const c = config;
    const V = configInt(c, "n_vocab");
    const d = configInt(c, "d_model");
    const nh = configInt(c, "n_heads");
    const nKv = c.n_kv_heads === undefined || c.n_kv_heads === null ? nh : configInt(c, "n_kv_heads");
    configInt(c, "n_layers");
    const dff = configInt(c, "d_ff");
    const W = configInt(c, "max_len");
    if (d % nh !== 0) throw new Error(`config.d_model (${d}) must be a multiple of config.n_heads (${nh})`);
    if (nh % nKv !== 0) throw new Error(`config.n_heads (${nh}) must be a multiple of config.n_kv_heads (${nKv})`);
    if (c.positions === "rotary" && (d / nh) % 2 !== 0) throw new Error(`rotary positions need an even head size, got ${d / nh}`);
    if (!["layernorm", "rmsnorm"].includes(c.norm)) throw new Error(`config.norm must be layernorm or rmsnorm, got ${c.norm}`);
    if (!["gelu", "swiglu"].includes(c.ffn)) throw new Error(`config.ffn must be gelu or swiglu, got ${c.ffn}`);
    if (![undefined, null, "learned", "sinusoidal", "rotary"].includes(c.positions)) {
      throw new Error(`config.positions must be learned, sinusoidal, rotary or null, got ${c.positions}`);
    }
    const hd = d / nh;
    const expected = { tok_emb: [V, d], "norm_f.weight": [d], "norm_f.bias": [d] };
    const optional = new Set(["norm_f.bias"]);
    if (c.positions === "learned") expected.pos_emb = [W, d];
    if (!c.tied_head) Object.assign(expected, { "head.weight": [d, V], "head.bias": [V] });
    optional.add("head.bias");
    for (let l = 0; l < c.n_layers; l++) {
      const p = `layers.${l}`;
      const shapes = {
        [`${p}.norm1.weight`]: [d], [`${p}.norm1.bias`]: [d], [`${p}.norm2.weight`]: [d], [`${p}.norm2.bias`]: [d],
        [`${p}.attn.wq`]: [d, d], [`${p}.attn.bq`]: [d], [`${p}.attn.wk`]: [d, nKv * hd], [`${p}.attn.bk`]: [nKv * hd],
        [`${p}.attn.wv`]: [d, nKv * hd], [`${p}.attn.bv`]: [nKv * hd], [`${p}.attn.wo`]: [d, d], [`${p}.attn.bo`]: [d],
        [`${p}.ffn.w1`]: [d, dff], [`${p}.ffn.b1`]: [dff], [`${p}.ffn.w2`]: [dff, d], [`${p}.ffn.b2`]: [d],
      };
      if (c.ffn === "swiglu") shapes[`${p}.ffn.w3`] = [d, dff];
      Object.assign(expected, shapes);
      for (const b of ["norm1.bias", "norm2.bias", "attn.bq", "attn.bk", "attn.bv", "attn.bo", "ffn.b1", "ffn.b2"]) optional.add(`${p}.${b}`);
    }
    if (c.norm === "layernorm") for (const name of Object.keys(expected)) if (/norm\w*\.bias$/.test(name)) optional.delete(name);
    checkShapes(tensors, expected, optional);
    this.config = config;
    this.tokenizer = tokenizer;
    this.maxLen = W;
    Object.assign(this, accessors(tensors));
    this.hd = hd;
    this.nKv = nKv;
    this.zeroHeads = new Set(); // "layer:head" keys of heads switched off (setZeroHeads)
  }

  norm(x, prefix, out) {
    const c = this.config;
    if (c.norm === "rmsnorm") return rmsNorm(x, this.t(`${prefix}.weight`), c.norm_eps, out);
    return layerNorm(x, this.t(`${prefix}.weight`), this.t(`${prefix}.bias`), c.norm_eps, out);
  }

  /** An empty KV cache: one per layer. */
  newCache() {
    return Array.from({ length: this.config.n_layers }, () => new KVCache(this.maxLen, this.nKv * this.hd));
  }

  /**
   * Run tokens at the next positions of `cache`, all at once (a prompt, or one token); return
   * the logits (n_vocab) of the last one and, when `attention` is true, its attention weights
   * [layer][head] -> Float32Array over positions 0..its position. Each row gets exactly the
   * numbers it would get run alone, one token at a time (attention is causal: row r reads
   * the cache up to its own position). allRows: logits holds every row's logits instead (n rows
   * of n_vocab; speculative decoding checks k drafted tokens in one pass).
   */
  forwardRows(tokens, cache, attention = false, allRows = false) {
    const c = this.config;
    const d = c.d_model;
    const n = tokens.length;
    const start = cache[0].length;
    for (const token of tokens) {
      if (!(Number.isInteger(token) && token >= 0 && token < c.n_vocab)) {
        throw new RangeError(`token must be an integer id in [0, ${c.n_vocab}), got ${token}`);
      }
    }
    if (n === 0) throw new RangeError("forwardRows needs at least one token");
    if (start + n > this.maxLen) throw new RangeError(`the model reads at most ${this.maxLen} tokens`);
    const kvw = this.nKv * this.hd;
    const X = new Float32Array(n * d);
    const E = this.t("tok_emb");
    for (let r = 0; r < n; r++) {
      X.set(E.subarray(tokens[r] * d, (tokens[r] + 1) * d), r * d);
      const pos = start + r;
      if (c.positions === "learned") {
        const pe = this.t("pos_emb");
        for (let i = 0; i < d; i++) X[r * d + i] += pe[pos * d + i];
      } else if (c.positions === "sinusoidal") {
        const pe = sinusoid(pos, d);
        for (let i = 0; i < d; i++) X[r * d + i] += pe[i];
      }
    }
    const H = new Float32Array(n * d);
    const Q = new Float32Array(n * d);
    const K = new Float32Array(n * kvw);
    const Vv = new Float32Array(n * kvw);
    const C = new Float32Array(n * d);
    const O = new Float32Array(n * d);
    const F1 = new Float32Array(n * c.d_ff);
    const F3 = c.ffn === "swiglu" ? new Float32Array(n * c.d_ff) : null;
    const weights = attention ? [] : null;
    for (let l = 0; l < c.n_layers; l++) {
      const p = `layers.${l}`;
      // attention half: x + W_O attend(norm(x))
      for (let r = 0; r < n; r++) this.norm(row(X, r, d), `${p}.norm1`, row(H, r, d));
      linearRows(H, n, d, this.m(`${p}.attn.wq`), this.t(`${p}.attn.bq`), Q);
      linearRows(H, n, d, this.m(`${p}.attn.wk`), this.t(`${p}.attn.bk`), K);
      linearRows(H, n, d, this.m(`${p}.attn.wv`), this.t(`${p}.attn.bv`), Vv);
      for (let r = 0; r < n; r++) {
        if (c.positions === "rotary") {
          const base = c.rotary_base || 10000;
          for (let hh = 0; hh < c.n_heads; hh++) rotate(Q, r * d + hh * this.hd, this.hd, start + r, c.rotary_layout, base);
          for (let hh = 0; hh < this.nKv; hh++) rotate(K, r * kvw + hh * this.hd, this.hd, start + r, c.rotary_layout, base);
        }
        cache[l].append(row(K, r, kvw), row(Vv, r, kvw));
      }
      for (let r = 0; r < n; r++) {
        const layerWeights = attention && r === n - 1 ? [] : null;
        attend(row(Q, r, d), cache[l], c.n_heads, this.nKv, this.hd, row(C, r, d), layerWeights, start + r + 1);
        if (layerWeights) weights.push(layerWeights);
      }
      zeroSwitchedOff(this.zeroHeads, l, c.n_heads, this.hd, C, n, d);
      linearRows(C, n, d, this.m(`${p}.attn.wo`), this.t(`${p}.attn.bo`), O);
      for (let i = 0; i < n * d; i++) X[i] += O[i];
      // feed-forward half: x + FFN(norm(x))
      for (let r = 0; r < n; r++) this.norm(row(X, r, d), `${p}.norm2`, row(H, r, d));
      linearRows(H, n, d, this.m(`${p}.ffn.w1`), this.t(`${p}.ffn.b1`), F1);
      if (c.ffn === "swiglu") {
        linearRows(H, n, d, this.m(`${p}.ffn.w3`), null, F3);
        for (let i = 0; i < F1.length; i++) F1[i] = silu(F1[i]) * F3[i];
      } else {
        gelu(F1);
      }
      linearRows(F1, n, c.d_ff, this.m(`${p}.ffn.w2`), this.t(`${p}.ffn.b2`), O);
      for (let i = 0; i < n * d; i++) X[i] += O[i];
    }
    if (allRows) {
      const Hf = new Float32Array(n * d);
      for (let r = 0; r < n; r++) this.norm(row(X, r, d), "norm_f", row(Hf, r, d));
      return { logits: this.projectRows(Hf, n), attention: weights };
    }
    const h = this.norm(row(X, n - 1, d), "norm_f", new Float32Array(d));
    return { logits: this.project(h), attention: weights };
  }

  /** One token at the next position of `cache`: its logits (and attention weights). */
  step(token, cache, attention = false) {
    return this.forwardRows([token], cache, attention);
  }

  /** Logits from the last hidden row: x W_head + b, or x E^T with a tied embedding. */
  project(h) {
    return this.projectRows(h, 1);
  }

  /** Logits of n hidden rows at once (n rows of n_vocab): each output row of W read once. */
  projectRows(H, n) {
    const c = this.config;
    const logits = new Float32Array(n * c.n_vocab);
    // E (V, d) is already the layout linearRows() reads for x E^T
    if (c.tied_head) return linearRows(H, n, c.d_model, this.r("tok_emb"), null, logits);
    return linearRows(H, n, c.d_model, this.m("head.weight"), this.t("head.bias"), logits);
  }

  /** Logits (n_prompt rows) of every position of a prompt, as model.forward returns them. */
  forward(ids) {
    const cache = this.newCache();
    return ids.map((id) => this.step(id, cache).logits);
  }

  /**
   * Continue promptIds one token at a time: yields {id, logits, attention, position, offset}
   * for each new token. `position` is the index, in prompt + new tokens, of the token whose
   * logits chose it; `attention` (when options.attention) holds, for every layer and head,
   * where that token looked, over the window the model read: prompt + new tokens from
   * index `offset` on.
   *
   * Past the context (options.crop, the default): with W = max_len and H = W / 2 (rounded
   * down), a prompt longer than W is cut to its last W tokens; each new token is fed at the
   * next position while the KV cache has room, and when it is full the last H tokens of the
   * text are encoded afresh at positions 0..H-1. Every prediction reads between H and W
   * tokens, and the re-encoding costs H tokens every W - H new tokens. (The library's
   * generate() does the same, token for token.) crop: false refuses, as before, a prompt and
   * maxNewTokens that together exceed max_len.
   */
  *steps(promptIds, maxNewTokens, options = {}) {
    const opts = checkOptions(options);
    const crop = options.crop ?? true;
    const ids = Array.from(promptIds);
    if (ids.length === 0) throw new RangeError("the prompt must hold at least one token");
    if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 0)) {
      throw new RangeError(`maxNewTokens must be an integer >= 0, got ${maxNewTokens}`);
    }
    for (const token of ids) {
      if (!(Number.isInteger(token) && token >= 0 && token < this.config.n_vocab)) {
        throw new RangeError(`token must be an integer id in [0, ${this.config.n_vocab}), got ${token}`);
      }
    }
    const W = this.maxLen;
    const half = Math.floor(W / 2);
    if (!crop && ids.length + maxNewTokens > W) {
      throw new RangeError(`prompt (${ids.length}) + maxNewTokens (${maxNewTokens}) exceeds the ` +
        `context of ${W} tokens`);
    }
    if (maxNewTokens === 0) return;
    const attention = Boolean(options.attention);
    const rng = makeRng(opts.seed);
    let offset = Math.max(0, ids.length - W);
    let cache = this.newCache();
    let out = this.forwardRows(ids.slice(offset), cache, attention);
    for (let n = 0; n < maxNewTokens; n++) {
      const id = pickToken(out.logits, opts, rng);
      ids.push(id);
      yield { id, logits: out.logits, attention: out.attention, position: ids.length - 2, offset };
      if (options.stopAt !== undefined && id === options.stopAt) return;
      if (n + 1 === maxNewTokens) break;
      if (cache[0].length < W) {
        out = this.forwardRows([id], cache, attention);
      } else {
        offset = ids.length - half;
        cache = this.newCache();
        out = this.forwardRows(ids.slice(offset), cache, attention);
      }
    }
  }

  /** The new ids (not the prompt) after maxNewTokens steps of decoding. */
  generate(promptIds, maxNewTokens, options = {}) {
    const out = [];
    for (const s of this.steps(promptIds, maxNewTokens, options)) {
      out.push(s.id);
      if (options.onToken) options.onToken(s);
    }
    return out;
  }
}

// ---------------------------------------------------------------------------
// The encoder-decoder (the translator)
// ---------------------------------------------------------------------------

/** GNMT's length penalty ((5 + n) / 6)^alpha (Wu et al., 2016), as the library's. */
const lengthPenaltyGnmt = (n, alpha) => ((5 + n) / 6) ** alpha;

/** log softmax of float32 logits, each value rounded to float32 as the library's is. */
function logSoftmax(z) {
  let m = -Infinity;
  for (let i = 0; i < z.length; i++) if (z[i] > m) m = z[i];
  let s = 0;
  for (let i = 0; i < z.length; i++) s += Math.exp(z[i] - m);
  const lse = m + Math.log(s);
  const out = new Float64Array(z.length);
  for (let i = 0; i < z.length; i++) out[i] = Math.fround(z[i] - lse);
  return out;
}

/** The `count` largest entries of x: indices, largest first, the lower index first on a tie. */
function topIndices(x, count) {
  const idx = [];
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (idx.length === count && !(v > x[idx[count - 1]])) continue;
    let at = idx.length === count ? count - 1 : idx.length;
    while (at > 0 && v > x[idx[at - 1]]) at -= 1;
    idx.splice(at, 0, i);
    if (idx.length > count) idx.pop();
  }
  return idx;
}

/** Most hypotheses a beam search keeps (a wider beam is refused before any memory is taken). */
export const MAX_BEAM = 100;

/**
 * The encoder-decoder of "Attention Is All You Need". config:
 *   n_vocab (shared by both sides), d_model, n_heads, d_ff, n_enc_layers, n_dec_layers,
 *   max_len, norm_eps, norm_position: "pre" | "post", emb_scale (multiply embeddings,
 *   e.g. sqrt(d_model)), positions: "sinusoidal" | "learned", tied_head, final_norm,
 *   bos_id, eos_id, pad_id.
 * Tensor names: tok_emb; enc.i.self.{wq,bq,wk,bk,wv,bv,wo,bo}, enc.i.norm1/norm2,
 * enc.i.ffn.{w1,b1,w2,b2}; dec.i.self.*, dec.i.cross.*, dec.i.norm1/2/3, dec.i.ffn.*;
 * enc_norm, dec_norm (pre-LN only); head.weight/head.bias unless tied.
 */
class EncoderDecoder {
  constructor(config, tensors, tokenizer) {
    const c = config;
    const V = configInt(c, "n_vocab");
    const d = configInt(c, "d_model");
    const nh = configInt(c, "n_heads");
    const dff = configInt(c, "d_ff");
    const W = configInt(c, "max_len");
    configInt(c, "n_enc_layers");
    configInt(c, "n_dec_layers");
    for (const key of ["bos_id", "eos_id"]) {
      if (!(Number.isInteger(c[key]) && c[key] >= 0 && c[key] < V)) throw new Error(`config.${key} must be a token id in [0, ${V}), got ${c[key]}`);
    }
    if (d % nh !== 0) throw new Error(`config.d_model (${d}) must be a multiple of config.n_heads (${nh})`);
    const expected = { tok_emb: [V, d] };
    const optional = new Set();
    if (c.positions === "learned") expected.pos_emb = [W, d];
    if (!c.tied_head) Object.assign(expected, { "head.weight": [d, V], "head.bias": [V] });
    optional.add("head.bias");
    const attn = (p) => ({
      [`${p}.wq`]: [d, d], [`${p}.bq`]: [d], [`${p}.wk`]: [d, d], [`${p}.bk`]: [d],
      [`${p}.wv`]: [d, d], [`${p}.bv`]: [d], [`${p}.wo`]: [d, d], [`${p}.bo`]: [d],
    });
    const ffn = (p) => ({ [`${p}.w1`]: [d, dff], [`${p}.b1`]: [dff], [`${p}.w2`]: [dff, d], [`${p}.b2`]: [d] });
    const norm = (p) => ({ [`${p}.weight`]: [d], [`${p}.bias`]: [d] });
    for (let l = 0; l < c.n_enc_layers; l++) {
      Object.assign(expected, attn(`enc.${l}.self`), ffn(`enc.${l}.ffn`), norm(`enc.${l}.norm1`), norm(`enc.${l}.norm2`));
    }
    for (let l = 0; l < c.n_dec_layers; l++) {
      Object.assign(expected, attn(`dec.${l}.self`), attn(`dec.${l}.cross`), ffn(`dec.${l}.ffn`),
        norm(`dec.${l}.norm1`), norm(`dec.${l}.norm2`), norm(`dec.${l}.norm3`));
    }
    if (c.norm_position !== "post") {
      Object.assign(expected, norm("enc_norm"), norm("dec_norm"));
      for (const name of ["enc_norm.weight", "enc_norm.bias", "dec_norm.weight", "dec_norm.bias"]) optional.add(name);
    }
    checkShapes(tensors, expected, optional);
    this.config = config;
    this.tokenizer = tokenizer;
    this.maxLen = W;
    Object.assign(this, accessors(tensors));
    this.hd = d / nh;
    this.project = DecoderLM.prototype.project;
    this.projectRows = DecoderLM.prototype.projectRows;
  }

  norm(x, prefix, out) {
    return layerNorm(x, this.t(`${prefix}.weight`), this.t(`${prefix}.bias`), this.config.norm_eps, out);
  }

  /** Rows of normalised X (n rows of d_model). */
  normRows(X, n, prefix) {
    const d = this.config.d_model;
    const out = new Float32Array(n * d);
    for (let r = 0; r < n; r++) this.norm(row(X, r, d), prefix, row(out, r, d));
    return out;
  }

  /** The embedding rows (scaled, plus positions) of tokens at positions pos[r]. */
  embedRows(tokens, positions) {
    const c = this.config;
    const d = c.d_model;
    const X = new Float32Array(tokens.length * d);
    const E = this.t("tok_emb");
    const scale = c.emb_scale || 1;
    tokens.forEach((token, r) => {
      if (!(Number.isInteger(token) && token >= 0 && token < c.n_vocab)) {
        throw new RangeError(`token must be an integer id in [0, ${c.n_vocab}), got ${token}`);
      }
      const pos = positions[r];
      const pe = c.positions === "learned" ? this.t("pos_emb").subarray(pos * d, (pos + 1) * d) : sinusoid(pos, d);
      for (let i = 0; i < d; i++) X[r * d + i] = E[token * d + i] * scale + pe[i];
    });
    return X;
  }

  /** A residual sub-layer on n rows, in place: pre-LN x + f(LN(x)) or post-LN LN(x + f(x)). */
  residualRows(X, n, normName, f) {
    const d = this.config.d_model;
    if (this.config.norm_position === "post") {
      const Y = f(X);
      const S = new Float32Array(n * d);
      for (let i = 0; i < n * d; i++) S[i] = X[i] + Y[i];
      for (let r = 0; r < n; r++) this.norm(row(S, r, d), normName, row(X, r, d));
    } else {
      const Y = f(this.normRows(X, n, normName));
      for (let i = 0; i < n * d; i++) X[i] += Y[i];
    }
  }

  /** The feed-forward sub-layer on n rows. */
  ffnRows(prefix, n) {
    const c = this.config;
    return (H) => {
      const F = linearRows(H, n, c.d_model, this.m(`${prefix}.w1`), this.t(`${prefix}.b1`), new Float32Array(n * c.d_ff));
      if (c.activation === "relu") for (let i = 0; i < F.length; i++) F[i] = Math.max(0, F[i]);
      else gelu(F);
      return linearRows(F, n, c.d_ff, this.m(`${prefix}.w2`), this.t(`${prefix}.b2`), new Float32Array(n * c.d_model));
    };
  }

  /** The linear map `name` (wq, wk, ...) of an attention sub-layer on n rows. */
  proj(prefix, name, H, n) {
    const d = this.config.d_model;
    return linearRows(H, n, d, this.m(`${prefix}.w${name}`), this.t(`${prefix}.b${name}`), new Float32Array(n * d));
  }

  /** The encoder's output rows (an array of S rows of d_model) for source ids: bidirectional self-attention. */
  encode(srcIds) {
    const c = this.config;
    const d = c.d_model;
    const S = srcIds.length;
    if (S === 0) throw new RangeError("the source must hold at least one token");
    if (S > this.maxLen) throw new RangeError(`the encoder reads at most ${this.maxLen} tokens, got ${S}`);
    const X = this.embedRows(srcIds, srcIds.map((_, i) => i));
    for (let l = 0; l < c.n_enc_layers; l++) {
      const p = `enc.${l}`;
      this.residualRows(X, S, `${p}.norm1`, (H) => {
        // every position attends to every other: fill one cache with all keys, then query it
        const cache = new KVCache(S, d);
        const K = this.proj(`${p}.self`, "k", H, S);
        const V = this.proj(`${p}.self`, "v", H, S);
        for (let s = 0; s < S; s++) cache.append(row(K, s, d), row(V, s, d));
        const Q = this.proj(`${p}.self`, "q", H, S);
        const C = new Float32Array(S * d);
        for (let s = 0; s < S; s++) attend(row(Q, s, d), cache, c.n_heads, c.n_heads, this.hd, row(C, s, d), null);
        return this.proj(`${p}.self`, "o", C, S);
      });
      this.residualRows(X, S, `${p}.norm2`, this.ffnRows(`${p}.ffn`, S));
    }
    const out = c.norm_position !== "post" && this.t("enc_norm.weight") ? this.normRows(X, S, "enc_norm") : X;
    return Array.from({ length: S }, (_, s) => out.slice(s * d, (s + 1) * d));
  }

  /** Decoder state for one sentence: self-attention caches, and cross-attention keys/values computed once. */
  newState(memory) {
    const c = this.config;
    const d = c.d_model;
    const S = memory.length;
    const M = new Float32Array(S * d);
    memory.forEach((m, s) => M.set(m, s * d));
    const self = [];
    const cross = [];
    for (let l = 0; l < c.n_dec_layers; l++) {
      self.push(new KVCache(this.maxLen, d));
      const kv = new KVCache(S, d);
      const K = this.proj(`dec.${l}.cross`, "k", M, S);
      const V = this.proj(`dec.${l}.cross`, "v", M, S);
      for (let s = 0; s < S; s++) kv.append(row(K, s, d), row(V, s, d));
      cross.push(kv);
    }
    return { self, cross };
  }

  /**
   * One decoder step for n hypotheses at once: tokens[r] at the next position of states[r].
   * Returns, for each, {logits, cross}: cross[layer][head] is its cross-attention row over
   * its source. The linear maps run on all n rows together (each weight row read once);
   * attention runs on each row's own caches, so a row's numbers never depend on the others.
   */
  stepRows(tokens, states) {
    const c = this.config;
    const d = c.d_model;
    const n = tokens.length;
    const positions = states.map((s) => s.self[0].length);
    for (const pos of positions) if (pos >= this.maxLen) throw new RangeError(`the decoder reads at most ${this.maxLen} tokens`);
    const X = this.embedRows(tokens, positions);
    const crossWeights = Array.from({ length: n }, () => []);
    for (let l = 0; l < c.n_dec_layers; l++) {
      const p = `dec.${l}`;
      this.residualRows(X, n, `${p}.norm1`, (H) => {
        const Q = this.proj(`${p}.self`, "q", H, n);
        const K = this.proj(`${p}.self`, "k", H, n);
        const V = this.proj(`${p}.self`, "v", H, n);
        const C = new Float32Array(n * d);
        for (let r = 0; r < n; r++) {
          states[r].self[l].append(row(K, r, d), row(V, r, d));
          attend(row(Q, r, d), states[r].self[l], c.n_heads, c.n_heads, this.hd, row(C, r, d), null);
        }
        return this.proj(`${p}.self`, "o", C, n);
      });
      this.residualRows(X, n, `${p}.norm2`, (H) => {
        const Q = this.proj(`${p}.cross`, "q", H, n);
        const C = new Float32Array(n * d);
        for (let r = 0; r < n; r++) {
          const w = [];
          attend(row(Q, r, d), states[r].cross[l], c.n_heads, c.n_heads, this.hd, row(C, r, d), w);
          crossWeights[r].push(w);
        }
        return this.proj(`${p}.cross`, "o", C, n);
      });
      this.residualRows(X, n, `${p}.norm3`, this.ffnRows(`${p}.ffn`, n));
    }
    const final = c.norm_position !== "post" && this.t("dec_norm.weight") ? this.normRows(X, n, "dec_norm") : X;
    const logits = this.projectRows(final, n);
    return Array.from({ length: n }, (_, r) => ({ logits: row(logits, r, c.n_vocab), cross: crossWeights[r] }));
  }

  /** One decoder step of one hypothesis: logits for the next target token, and the cross-attention weights [layer][head]. */
  step(token, state) {
    return this.stepRows([token], [state])[0];
  }

  /**
   * Target ids for source ids: greedy (beam 1) or beam search; see decodeBatch().
   * Returns {ids, cross}: cross[t][layer][head] is the weight row over the source tokens.
   */
  decode(srcIds, options = {}) {
    return this.decodeBatch([srcIds], options)[0];
  }

  /**
   * Target ids for several sources at once, each decoded as if alone: greedy (beam 1) or the
   * library's beam search (attention_lib.models.decoding.beam_search) with GNMT's length
   * penalty ((5 + n) / 6)^alpha (Wu et al., 2016). A sentence of S source tokens gets at
   * most min(max_len - 1, 2 S + 10) target tokens: its own length sets its limit, never
   * its neighbours'. The decoder steps of every live hypothesis of every sentence run
   * together (stepRows).
   *
   * Beam search, per sentence: K slots, at first one live hypothesis. Each step looks at the
   * 2K best extensions of its live hypotheses (ranked by log-probability, the lower slot
   * and token first on a tie), in order: an extension by <eos> is finished, with the score
   * log p / lp(its length + 1); the others fill the K slots. The sentence stops when it has
   * K finished hypotheses and its best live one, scored with the largest penalty, ranks
   * below the K-th best finished one; or at its length limit. The best finished hypothesis
   * wins (the first on a tie), or, if none finished, the best live one.
   */
  decodeBatch(sources, { beam = 1, lengthPenalty = 0.6, maxLen = this.maxLen } = {}) {
    const c = this.config;
    if (!(Number.isInteger(beam) && beam >= 1 && beam <= MAX_BEAM)) {
      throw new RangeError(`beam must be an integer from 1 to ${MAX_BEAM}, got ${beam}`);
    }
    if (!(Number.isFinite(lengthPenalty) && lengthPenalty >= 0 && lengthPenalty <= 10)) {
      throw new RangeError(`lengthPenalty must be a number from 0 to 10, got ${lengthPenalty}`);
    }
    const limits = sources.map((src) => Math.min(maxLen - 1, this.maxLen - 1, 2 * src.length + 10));
    const states = sources.map((src) => this.newState(this.encode(src)));
    if (beam === 1) {
      const hyps = states.map((state) => ({ state, ids: [], cross: [], last: c.bos_id, done: false }));
      for (;;) {
        const live = hyps.filter((hyp, b) => !hyp.done && hyp.ids.length < limits[b]);
        if (!live.length) break;
        const outs = this.stepRows(live.map((hyp) => hyp.last), live.map((hyp) => hyp.state));
        live.forEach((hyp, r) => {
          const token = argmax(outs[r].logits);
          if (token === c.eos_id) hyp.done = true;
          else {
            hyp.ids.push(token);
            hyp.cross.push(outs[r].cross);
            hyp.last = token;
          }
        });
      }
      return hyps.map(({ ids, cross }) => ({ ids, cross }));
    }
    const K = beam;
    const lp = (n) => lengthPenaltyGnmt(n, lengthPenalty);
    // per sentence: its K slots (live hypotheses, or null for a dead slot), finished ones
    const sent = states.map((state) => ({
      slots: [{ ids: [], cross: [], score: 0, state, last: c.bos_id }, ...Array(K - 1).fill(null)],
      finished: [],
      active: true,
      t: 0,
    }));
    for (;;) {
      const rows = [];
      sent.forEach((s, b) => {
        if (s.active && s.t >= limits[b]) s.active = false;
        if (s.active) for (const hyp of s.slots) if (hyp) rows.push(hyp);
      });
      if (!rows.length) break;
      const outs = this.stepRows(rows.map((hyp) => hyp.last), rows.map((hyp) => hyp.state));
      rows.forEach((hyp, r) => {
        hyp.logp = logSoftmax(outs[r].logits);
        hyp.stepCross = outs[r].cross;
      });
      sent.forEach((s, b) => {
        if (!s.active) return;
        const penalty = lp(s.t + 1); // of a hypothesis that ends now
        const cands = [];
        s.slots.forEach((hyp, k) => {
          if (!hyp) return;
          for (const tok of topIndices(hyp.logp, 2 * K)) cands.push({ k, tok, score: hyp.score + hyp.logp[tok] });
        });
        const V = c.n_vocab;
        cands.sort((x, y) => y.score - x.score || x.k * V + x.tok - (y.k * V + y.tok));
        const slots = [];
        const taken = new Set();
        for (const cand of cands.slice(0, 2 * K)) {
          if (!Number.isFinite(cand.score)) break;
          const from = s.slots[cand.k];
          if (cand.tok === c.eos_id) {
            s.finished.push({ score: cand.score / penalty, ids: from.ids, cross: from.cross });
            continue;
          }
          // the first extension of a hypothesis takes over its caches; the others copy them
          const state = taken.has(cand.k) ? { self: from.state.self.map((kv) => kv.clone()), cross: from.state.cross } : from.state;
          taken.add(cand.k);
          slots.push({ ids: [...from.ids, cand.tok], cross: [...from.cross, from.stepCross], score: cand.score, state, last: cand.tok });
          if (slots.length === K) break;
        }
        // Copies are made before any hypothesis runs its next step, so a cache taken over
        // above is still the parent's when a later sibling copies it.
        while (slots.length < K) slots.push(null);
        s.slots = slots;
        s.t += 1;
        if (s.finished.length >= K) {
          const bestLive = Math.max(-Infinity, ...slots.filter(Boolean).map((hyp) => hyp.score)) / lp(limits[b]);
          const worstKept = s.finished.map((f) => f.score).sort((x, y) => x - y)[s.finished.length - K];
          if (bestLive < worstKept) s.active = false;
        }
      });
    }
    return sent.map((s) => {
      let best = s.finished[0];
      for (const f of s.finished) if (f.score > best.score) best = f;
      if (!best) {
        // nothing ended: the best live one (the first on a tie)
        for (const hyp of s.slots) if (hyp && (!best || hyp.score > best.score)) best = hyp;
      }
      return { ids: best.ids, cross: best.cross };
    });
  }

  /** The source ids of one English sentence, cut as the library's translate_sentences cuts them. */
  sourceIds(text) {
    const full = this.tokenizer.encode(text, { source: true });
    const most = Math.min(this.maxLen, this.config.max_source_tokens || this.maxLen);
    return { src: full.slice(0, most), truncated: full.length > most };
  }

  /** English in, French out: the tokenizer around decode(). */
  translate(text, { beam = 1, lengthPenalty = 0.6, details = false } = {}) {
    return this.translateMany([text], { beam, lengthPenalty, details })[0];
  }

  /**
   * Several English sentences at once (decodeBatch, `batch` sentences a step): the French of
   * each, the same as translate() gives it alone; an empty sentence gives "".
   */
  translateMany(texts, { beam = 1, lengthPenalty = 0.6, details = false, batch = 32 } = {}) {
    const enc = texts.map((text) => this.sourceIds(text));
    const outs = new Array(texts.length).fill(null);
    const todo = enc.map((e, i) => i).filter((i) => enc[i].src.length > 0);
    for (let at = 0; at < todo.length; at += batch) {
      const part = todo.slice(at, at + batch);
      const decoded = this.decodeBatch(part.map((i) => enc[i].src), { beam, lengthPenalty });
      part.forEach((i, j) => { outs[i] = decoded[j]; });
    }
    return texts.map((_, i) => {
      const { src, truncated } = enc[i];
      const out = outs[i] || { ids: [], cross: [] };
      const french = src.length ? this.tokenizer.decode(out.ids) : "";
      return details ? { text: french, src, ids: out.ids, cross: out.cross, truncated } : french;
    });
  }
}

// ---------------------------------------------------------------------------
// Tokenizers
// ---------------------------------------------------------------------------

/** One character a token (the Shakespeare model): the sorted characters of the training text. */
export class CharTokenizer {
  constructor(chars) {
    this.chars = Array.from(chars);
    this.lookup = new Map(this.chars.map((ch, i) => [ch, i]));
    this.vocabSize = this.chars.length;
  }

  /** Characters the model has never seen, in order of appearance (for error messages). */
  unknown(text) {
    return [...new Set(Array.from(text).filter((ch) => !this.lookup.has(ch)))];
  }

  encode(text) {
    const bad = this.unknown(text);
    if (bad.length) {
      throw new RangeError(`the text has characters outside the model's vocabulary: ${bad.map((ch) => JSON.stringify(ch)).join(" ")}`);
    }
    return Array.from(text, (ch) => this.lookup.get(ch));
  }

  decode(ids) {
    return Array.from(ids, (i) => this.chars[i]).join("");
  }

  /** Text one token at a time: push(id) returns the new text, flush() what is left (""). */
  streamDecoder() {
    return { push: (id) => this.chars[id] ?? "", flush: () => "" };
  }

  piece(id) {
    return this.chars[id];
  }
}

/** A binary max-heap of candidate merges: the highest score first, the leftmost on a tie. */
class PairHeap {
  constructor() {
    this.items = [];
  }

  get size() {
    return this.items.length;
  }

  static before(a, b) {
    return a.score > b.score || (a.score === b.score && a.left < b.left);
  }

  push(score, left, right, merged) {
    const items = this.items;
    items.push({ score, left, right, merged });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!PairHeap.before(items[i], items[parent])) break;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }

  pop() {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let best = i;
        if (l < items.length && PairHeap.before(items[l], items[best])) best = l;
        if (r < items.length && PairHeap.before(items[r], items[best])) best = r;
        if (best === i) break;
        [items[i], items[best]] = [items[best], items[i]];
        i = best;
      }
    }
    return top;
  }
}

/**
 * llama2.c's tokenizer (SentencePiece BPE with byte fallback): a leading space, one
 * token per character ("▁" for a space), bytes <0xXX> for characters not in the vocabulary,
 * then repeatedly merge the adjacent pair whose merged piece has the highest score (the
 * leftmost on a tie), as attention_lib.data.llama_tokenizer does: a linked list of symbols
 * and a heap of candidate pairs, O(n log n) for a text of n characters.
 */
export class Llama2cTokenizer {
  constructor({ tokens, scores, bos_id = 1, eos_id = 2 }) {
    this.tokens = tokens;
    this.scores = scores;
    this.bosId = bos_id;
    this.eosId = eos_id;
    this.vocabSize = tokens.length;
    // the pieces text is written in and merged into: not <unk>, <s>, </s> or <0xXX> bytes
    const control = new Set(["<unk>", "<s>", "</s>"]);
    this.lookup = new Map();
    this.byteId = new Array(256);
    tokens.forEach((t, i) => {
      const byte = /^<0x([0-9A-F]{2})>$/.exec(t);
      if (byte) this.byteId[parseInt(byte[1], 16)] = i;
      else if (!control.has(t)) this.lookup.set(t, i);
    });
  }

  /** Ids of text, after a BOS token when bos is true (what llama2.c feeds its model). */
  encode(text, { bos = true } = {}) {
    const lone = /\p{Cs}/u.exec(text); // half of a pair: UTF-8 has no bytes for it
    if (lone) {
      const at = Array.from(text.slice(0, lone.index)).length;
      const code = lone[0].charCodeAt(0).toString(16).toUpperCase();
      throw new RangeError(`text cannot be written in UTF-8: a lone surrogate U+${code} at character ${at}`);
    }
    const ids = bos ? [this.bosId] : [];
    if (text === "") return ids;
    return ids.concat(this.merge("▁" + text.replaceAll(" ", "▁")));
  }

  /** One id per character (bytes for unknown ones), then the best-scoring merges, leftmost first. */
  merge(s) {
    const ids = [];
    const utf8 = new TextEncoder();
    for (const ch of s) {
      const id = this.lookup.get(ch);
      if (id !== undefined) ids.push(id);
      else for (const byte of utf8.encode(ch)) ids.push(this.byteId[byte]);
    }
    const n = ids.length;
    const next = Int32Array.from({ length: n }, (_, i) => (i + 1 < n ? i + 1 : -1));
    const prev = Int32Array.from({ length: n }, (_, i) => i - 1);
    const alive = new Uint8Array(n).fill(1);
    const heap = new PairHeap();
    const push = (left) => {
      const right = next[left];
      if (right < 0) return;
      const merged = this.lookup.get(this.tokens[ids[left]] + this.tokens[ids[right]]);
      if (merged !== undefined) heap.push(this.scores[merged], left, right, merged);
    };
    for (let i = 0; i + 1 < n; i++) push(i);
    while (heap.size) {
      const { left, right, merged } = heap.pop();
      // stale: one of the two has merged with something else since this pair was pushed
      if (!alive[left] || !alive[right] || next[left] !== right ||
          this.lookup.get(this.tokens[ids[left]] + this.tokens[ids[right]]) !== merged) continue;
      ids[left] = merged;
      alive[right] = 0;
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      push(left);
      if (prev[left] >= 0) push(prev[left]);
    }
    return ids.filter((_, i) => alive[i]);
  }

  /** The text of one token as it prints (bytes as bytes, "▁" as a space). */
  pieceBytes(id, prev) {
    const t = this.tokens[id];
    if (id === this.bosId || id === this.eosId || id === 0) return [];
    const byte = /^<0x([0-9A-F]{2})>$/.exec(t);
    if (byte) return [parseInt(byte[1], 16)];
    let s = t.replaceAll("▁", " ");
    if ((prev === this.bosId || prev === undefined) && s.startsWith(" ")) s = s.slice(1);
    return Array.from(new TextEncoder().encode(s));
  }

  decode(ids) {
    const bytes = [];
    let prev;
    for (const id of ids) {
      bytes.push(...this.pieceBytes(id, prev));
      prev = id;
    }
    return new TextDecoder().decode(new Uint8Array(bytes));
  }

  /**
   * Text one token at a time, in constant work per token (not the whole text decoded again):
   * push(id) returns the text that token completes (a character split over byte tokens
   * comes out with its last byte), flush() whatever incomplete bytes are left (as U+FFFD).
   */
  streamDecoder() {
    const utf8 = new TextDecoder();
    let prev;
    return {
      push: (id) => {
        const text = utf8.decode(new Uint8Array(this.pieceBytes(id, prev)), { stream: true });
        prev = id;
        return text;
      },
      flush: () => utf8.decode(),
    };
  }

  /** The text of one token for display: an ASCII byte as its character ("<0x0A>" is a newline). */
  piece(id) {
    const t = this.tokens[id];
    const byte = /^<0x([0-9A-F]{2})>$/.exec(t);
    if (!byte) return t.replaceAll("▁", " ");
    const code = parseInt(byte[1], 16);
    return code < 0x80 ? String.fromCharCode(code) : t;
  }
}

/**
 * GPT-2's byte-level alphabet: every byte gets a printable character (the printable bytes
 * keep their own; the rest, such as the space, move to U+0100 and above: a space is "Ġ").
 */
function byteAlphabet() {
  const keep = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const toChar = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) toChar[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  return { toChar, toByte: new Map(toChar.map((c, b) => [c, b])) };
}

/** GPT-2's pre-tokenizer pattern: contractions, letters, digits, other symbols, spaces. */
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/**
 * A byte-pair encoder from a Hugging Face `tokenizers` JSON (model.type "BPE"): split the
 * text as its pre-tokenizer does (Metaspace or whitespace), then apply the learned merges
 * in order of rank. Special tokens such as <s> and </s> are looked up by name.
 */
export class BPETokenizer {
  constructor(json) {
    const model = json.model;
    if (!model || model.type !== "BPE") throw new Error("the tokenizer JSON must hold a BPE model");
    this.vocab = new Map(Object.entries(model.vocab));
    this.tokens = [];
    for (const [t, i] of this.vocab) this.tokens[i] = t;
    for (const at of json.added_tokens || []) {
      this.vocab.set(at.content, at.id);
      this.tokens[at.id] = at.content;
    }
    this.ranks = new Map((model.merges || []).map((m, r) => [Array.isArray(m) ? m.join(" ") : m, r]));
    this.unk = model.unk_token;
    this.pre = json.pre_tokenizer || {};
    this.decoderSpec = json.decoder || {};
    this.normalizer = json.normalizer || null;
    this.vocabSize = this.tokens.length;
    this.cache = new Map();
    this.specialIds = new Set((json.added_tokens || []).filter((t) => t.special).map((t) => t.id));
    this.byteLevel = this.pre.type === "ByteLevel" ? byteAlphabet() : null;
  }

  normalize(text) {
    const apply = (n, s) => {
      if (!n) return s;
      if (n.type === "Sequence") return n.normalizers.reduce((acc, m) => apply(m, acc), s);
      if (n.type === "NFKC" || n.type === "NFC" || n.type === "NFD" || n.type === "NFKD") return s.normalize(n.type);
      if (n.type === "Lowercase") return s.toLowerCase();
      if (n.type === "Strip") return s.trim();
      return s;
    };
    return apply(this.normalizer, text);
  }

  words(text) {
    if (text === "") return []; // no prefix space for nothing (as Hugging Face's tokenizers)
    if (this.byteLevel) {
      const prefixed = this.pre.add_prefix_space && !text.startsWith(" ") ? ` ${text}` : text;
      const { toChar } = this.byteLevel;
      return (prefixed.match(GPT2_SPLIT) || []).map((w) =>
        Array.from(new TextEncoder().encode(w), (b) => toChar[b]).join(""));
    }
    const kinds = this.pre.type === "Sequence" ? this.pre.pretokenizers.map((p) => p.type) : [this.pre.type];
    if (kinds.includes("Metaspace")) {
      const rep = (this.pre.replacement || (this.pre.pretokenizers || []).find((p) => p.type === "Metaspace").replacement || "▁");
      const s = rep + text.replaceAll(" ", rep);
      return s.split(new RegExp(`(?=${rep})`, "u")).filter((w) => w.length);
    }
    // Whitespace: runs of word characters, or runs of other non-space characters
    return text.match(/\w+|[^\w\s]+/gu) || [];
  }

  bpe(word) {
    if (this.cache.has(word)) return this.cache.get(word);
    const parts = mergeByRank(Array.from(word), this.ranks);
    const ids = [];
    for (const p of parts) {
      const id = this.vocab.get(p);
      if (id !== undefined) ids.push(id);
      else if (this.unk !== null && this.unk !== undefined) ids.push(this.vocab.get(this.unk));
    }
    this.cache.set(word, ids);
    return ids;
  }

  encode(text) {
    return this.words(this.normalize(text)).flatMap((w) => this.bpe(w));
  }

  decode(ids) {
    const pieces = Array.from(ids, (i) => this.tokens[i] ?? "");
    if (this.byteLevel) {
      const bytes = [];
      for (const ch of pieces.join("")) bytes.push(this.byteLevel.toByte.get(ch) ?? 63);
      return new TextDecoder().decode(new Uint8Array(bytes));
    }
    if (JSON.stringify(this.decoderSpec).includes("Metaspace")) {
      return pieces.join("").replaceAll("▁", " ").replace(/^ /, "");
    }
    return pieces.join(" ");
  }

  /** Text one token at a time (the whole text decoded again: fine for a sentence). */
  streamDecoder() {
    const ids = [];
    let shown = "";
    return {
      push: (id) => {
        ids.push(id);
        const text = this.decode(ids);
        const fresh = text.startsWith(shown) ? text.slice(shown.length) : "";
        if (text.startsWith(shown)) shown = text;
        return fresh;
      },
      flush: () => "",
    };
  }

  piece(id) {
    if (this.byteLevel) return this.decode([id]);
    return (this.tokens[id] ?? "").replaceAll("▁", " ");
  }
}

/** The translator's tokenizer: BPE around the model's own start and end tokens. */
class TranslatorTokenizer extends BPETokenizer {
  constructor(json, config) {
    super(json);
    this.special = new Set([config.bos_id, config.eos_id, config.pad_id].filter((x) => x !== undefined));
    this.eosId = config.eos_id;
    this.appendEos = Boolean(config.src_eos);
  }

  /** The ids of one sentence: Unicode NFC, surrounding and repeated spaces removed (as the library). */
  encode(text, { source = false } = {}) {
    const ids = super.encode(text.normalize("NFC").split(/\s+/u).filter(Boolean).join(" "));
    return source && this.appendEos ? [...ids, this.eosId] : ids;
  }

  decode(ids) {
    return super.decode(Array.from(ids).filter((i) => !this.special.has(i) && !this.specialIds.has(i))).trim();
  }

  /** One token's text with its leading space kept (decode trims a sentence's; a piece must not). */
  piece(id) {
    return this.special.has(id) || this.specialIds.has(id) ? "" : super.decode([id]);
  }
}

function makeTokenizer(spec, config) {
  if (spec.type === "chars") return new CharTokenizer(spec.chars);
  if (spec.type === "llama2c") return new Llama2cTokenizer(spec);
  if (spec.type === "bpe") return new TranslatorTokenizer(spec.json, config);
  throw new Error(`unknown tokenizer type ${spec.type}`);
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

/**
 * A model from its manifest (the parsed JSON that scripts/export_models.py writes) and its
 * weights (an ArrayBuffer, or a typed array such as node's Buffer, of the .bin file beside it).
 *
 * The weights are trusted only once they are the file the manifest describes: its size and
 * SHA-256 must be the manifest's (`bytes`, `sha256`), every tensor must lie inside it, have
 * the shape the configuration implies and hold finite numbers. Anything else is an Error
 * with a one-line message naming what is wrong. options.digest: the SHA-256 (hex) of the
 * weights when the caller has already computed it (WebCrypto, node's crypto), to save
 * computing it again here.
 */
export function loadModel(manifest, weights, options = {}) {
  if (!manifest || typeof manifest !== "object" || Array.isArray(manifest)) {
    throw new TypeError("manifest must be the parsed JSON object of a model (config, tokenizer, tensors)");
  }
  for (const key of ["config", "tokenizer", "tensors"]) {
    if (!manifest[key] || typeof manifest[key] !== "object" || Array.isArray(manifest[key])) {
      throw new TypeError(`manifest.${key} must be an object: this is not a model description`);
    }
  }
  if (!(typeof manifest.sha256 === "string" && /^[0-9a-f]{64}$/.test(manifest.sha256))) {
    throw new Error("the manifest has no sha256 of its weights (64 hex digits): the weights cannot be checked");
  }
  let buffer = weights;
  if (ArrayBuffer.isView(weights)) {
    buffer = weights.buffer.slice(weights.byteOffset, weights.byteOffset + weights.byteLength);
  }
  if (!(buffer instanceof ArrayBuffer)) throw new TypeError("weights must be an ArrayBuffer");
  if (manifest.bytes !== undefined && buffer.byteLength !== manifest.bytes) {
    throw new Error(`the weights are ${buffer.byteLength} bytes but the manifest says ${manifest.bytes}: ` +
      "the file is truncated or damaged");
  }
  const digest = options.digest ?? sha256Hex(buffer);
  if (digest !== manifest.sha256) {
    throw new Error(`the weights' sha256 is ${digest.slice(0, 12)}..., the manifest says ${manifest.sha256.slice(0, 12)}...: ` +
      "the file is damaged or belongs to another model");
  }
  const tensors = readTensors(manifest, buffer);
  const tokenizer = makeTokenizer(manifest.tokenizer, manifest.config);
  const arch = manifest.config.arch;
  let model;
  if (arch === "decoder") model = new DecoderLM(manifest.config, tensors, tokenizer);
  else if (arch === "encoder-decoder") model = new EncoderDecoder(manifest.config, tensors, tokenizer);
  else throw new Error(`unknown architecture ${arch}`);
  model.name = manifest.name;
  return model;
}

/** SHA-256 of an ArrayBuffer as hex (WebCrypto: browsers and node >= 19). */
export async function sha256(buffer) {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", buffer);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
