// window.mjs: a decoder that writes for any length in constant memory, with a sliding window
// and attention sinks (StreamingLM, Xiao et al., 2023), as the library's
// `MultiHeadAttention(window=, sinks=)` and `RollingKVCache` do it (chapter 19).
//
// Each layer keeps the keys and values of the first `sinks` positions of the stream and of the
// last `window` ones, nothing between: a `RollingKVCache` of at most sinks + window rows. As in
// the library, positions are counted *inside the cache*: the keys are kept unrotated and turned
// by their index in the cache at every step, so a rotary model never meets a distance longer
// than sinks + window, however long the stream. Without a window the cache keeps every row
// (full attention, the rows and the rotary distances growing with the stream).
//
// It runs a model of the runtime (`loadModel` in transformer.mjs) with rotary or no positions,
// reading its weights and configuration only; learned and sinusoidal positions are added at
// the input by the position in the stream and stop at max_len, so they are refused here.
// tests/js/window.test.mjs checks every logit against the library's within 1e-4, far past the
// window and the training context (fixture: scripts/make_window_fixture.py).
import { erf, makeRng, pickToken } from "./transformer.mjs";

const checkInt = (value, name, min) => {
  if (!(Number.isInteger(value) && value >= min)) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
  return value;
};

/**
 * The keys and values one attention layer keeps, unrotated: rows of `width` floats. With a
 * `window`, trim() drops every row no later query can see (all but the first `sinks` and the
 * last window - 1); without one (window null) it keeps them all. `position` counts the
 * positions of the stream seen so far; `length` the rows held.
 */
export class RollingKVCache {
  constructor(window, sinks = 0, width = 1) {
    if (window !== null) checkInt(window, "window", 1);
    checkInt(sinks, "sinks", 0);
    if (sinks > 0 && window === null) {
      throw new RangeError(`sinks = ${sinks} needs a window: attention sinks are the first positions ` +
        "kept in view when a sliding window drops the rest; pass window too");
    }
    checkInt(width, "width", 1);
    this.window = window;
    this.sinks = sinks;
    this.width = width;
    this.length = 0;
    this.position = 0;
    const rows = window === null ? 64 : sinks + window;
    this.k = new Float32Array(rows * width);
    this.v = new Float32Array(rows * width);
  }

  /** Add n rows (flat arrays of n * width floats). */
  append(k, v, n) {
    const w = this.width;
    if ((this.length + n) * w > this.k.length) {
      const rows = Math.max(2 * this.k.length / w, this.length + n);
      for (const key of ["k", "v"]) {
        const grown = new Float32Array(rows * w);
        grown.set(this[key].subarray(0, this.length * w));
        this[key] = grown;
      }
    }
    this.k.set(k.subarray(0, n * w), this.length * w);
    this.v.set(v.subarray(0, n * w), this.length * w);
    this.length += n;
  }

  /** Drop the rows no later query can see: all but the first sinks and the last window - 1. */
  trim() {
    if (this.window === null) return;
    const keepEnd = this.window - 1;
    if (this.length <= this.sinks + keepEnd) return;
    const w = this.width;
    const from = (this.length - keepEnd) * w;
    this.k.copyWithin(this.sinks * w, from, this.length * w);
    this.v.copyWithin(this.sinks * w, from, this.length * w);
    this.length = this.sinks + keepEnd;
  }

  /** Bytes of keys and values held (float32). */
  get bytes() {
    return 2 * this.length * this.width * 4;
  }
}

/** W (n_in, n_out) row-major as W^T (n_out rows of n_in), for row-by-row dot products. */
function transpose(data, nIn, nOut) {
  const T = new Float32Array(data.length);
  for (let i = 0; i < nIn; i++) for (let j = 0; j < nOut; j++) T[j * nIn + i] = data[i * nOut + j];
  return T;
}

/** out (n rows of nOut) = X (n rows of nIn) W + b, W given as W^T; sums in double precision. */
function linear(X, n, nIn, WT, b, out) {
  const nOut = WT.length / nIn;
  for (let r = 0; r < n; r++) {
    for (let j = 0; j < nOut; j++) {
      let s = 0;
      for (let i = 0; i < nIn; i++) s += X[r * nIn + i] * WT[j * nIn + i];
      out[r * nOut + j] = s + (b ? b[j] : 0);
    }
  }
  return out;
}

function layerNormRows(X, n, d, gamma, beta, eps, out) {
  for (let r = 0; r < n; r++) {
    const o = r * d;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += X[o + i];
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (X[o + i] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / d + eps);
    for (let i = 0; i < d; i++) out[o + i] = (X[o + i] - mean) * inv * gamma[i] + (beta ? beta[i] : 0);
  }
  return out;
}

const PARTS = new WeakMap(); // model -> its weights, transposed once

function parts(model) {
  if (!PARTS.has(model)) {
    const c = model.config;
    const d = c.d_model;
    const kvw = (c.n_kv_heads ?? c.n_heads) * (d / c.n_heads);
    const m = (name, nIn, nOut) => transpose(model.t(name), nIn, nOut);
    const layers = [];
    for (let l = 0; l < c.n_layers; l++) {
      const p = `layers.${l}`;
      layers.push({
        wq: m(`${p}.attn.wq`, d, d), wk: m(`${p}.attn.wk`, d, kvw), wv: m(`${p}.attn.wv`, d, kvw),
        wo: m(`${p}.attn.wo`, d, d), w1: m(`${p}.ffn.w1`, d, c.d_ff), w2: m(`${p}.ffn.w2`, c.d_ff, d),
      });
    }
    const head = c.tied_head ? model.t("tok_emb") : m("head.weight", d, c.n_vocab);
    PARTS.set(model, { layers, head, tables: { rows: 0, cos: null, sin: null } });
  }
  return PARTS.get(model);
}

/** cos and sin of index p times base^(-2i/hd), for indices 0..n-1, grown on demand. */
function rotaryTables(tables, n, hd, base) {
  if (tables.rows >= n) return tables;
  const rows = Math.max(n, 2 * tables.rows, 64);
  const half = hd / 2;
  tables.cos = new Float64Array(rows * half);
  tables.sin = new Float64Array(rows * half);
  for (let p = 0; p < rows; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * base ** ((-2 * i) / hd);
      tables.cos[p * half + i] = Math.cos(angle);
      tables.sin[p * half + i] = Math.sin(angle);
    }
  }
  tables.rows = rows;
  return tables;
}

/** Rotate `heads` heads of hd features of each of n rows (row r at index first + r), in place. */
function rotateRows(X, n, heads, hd, first, tables, layout) {
  const half = hd / 2;
  for (let r = 0; r < n; r++) {
    const t = (first + r) * half;
    for (let h = 0; h < heads; h++) {
      const o = (r * heads + h) * hd;
      for (let i = 0; i < half; i++) {
        const a = layout === "half" ? o + i : o + 2 * i;
        const b = layout === "half" ? o + i + half : o + 2 * i + 1;
        const c = tables.cos[t + i];
        const s = tables.sin[t + i];
        const xa = X[a];
        const xb = X[b];
        X[a] = xa * c - xb * s;
        X[b] = xa * s + xb * c;
      }
    }
  }
}

function checkModel(model) {
  const c = model && model.config;
  if (!c || c.arch !== "decoder" || typeof model.t !== "function") {
    throw new TypeError("model must be a decoder-only model from loadModel()");
  }
  if (c.norm !== "layernorm" || c.ffn !== "gelu") {
    throw new Error(`the window runner covers GPT-style blocks (layernorm, gelu), got ${c.norm}, ${c.ffn}`);
  }
  if (!["rotary", null, undefined].includes(c.positions)) {
    throw new Error(`positions "${c.positions}" are added at the input by the position in the stream and ` +
      "stop at max_len: a rolling cache needs rotary or no positions");
  }
}

/** One rolling cache per layer of `model` (window null: keep every row, full attention). */
export function rollingCache(model, window, sinks = 0) {
  checkModel(model);
  const c = model.config;
  const width = (c.n_kv_heads ?? c.n_heads) * (c.d_model / c.n_heads);
  return Array.from({ length: c.n_layers }, () => new RollingKVCache(window, sinks, width));
}

/** Bytes of keys and values held by a rolling cache (all layers). */
export const cacheBytes = (cache) => cache.reduce((sum, layer) => sum + layer.bytes, 0);

/**
 * Run `tokens` at the next positions of the stream `cache` holds (the library's
 * `model.forward(tokens, cache)` with a RollingKVCache); return the logits (n_vocab) of the last
 * one and, with `attention`, its weights [layer][head] over the cache's rows (index 0 first:
 * the sinks, then the window).
 */
export function forwardRolling(model, tokens, cache, attention = false) {
  checkModel(model);
  const c = model.config;
  const n = tokens.length;
  if (n === 0) throw new RangeError("forwardRolling needs at least one token");
  for (const token of tokens) {
    if (!(Number.isInteger(token) && token >= 0 && token < c.n_vocab)) {
      throw new RangeError(`token must be an integer id in [0, ${c.n_vocab}), got ${token}`);
    }
  }
  if (!Array.isArray(cache) || cache.length !== c.n_layers || !(cache[0] instanceof RollingKVCache)) {
    throw new TypeError("cache must be rollingCache(model, window, sinks)");
  }
  const W = parts(model);
  const d = c.d_model;
  const nh = c.n_heads;
  const nKv = c.n_kv_heads ?? nh;
  const hd = d / nh;
  const kvw = nKv * hd;
  const group = nh / nKv;
  const scale = 1 / Math.sqrt(hd);
  const rotary = c.positions === "rotary";
  const X = new Float32Array(n * d);
  const E = model.t("tok_emb");
  tokens.forEach((t, r) => X.set(E.subarray(t * d, (t + 1) * d), r * d));
  const H = new Float32Array(n * d);
  const Q = new Float32Array(n * d);
  const K = new Float32Array(n * kvw);
  const V = new Float32Array(n * kvw);
  const C = new Float32Array(n * d);
  const O = new Float32Array(n * d);
  const F = new Float32Array(n * c.d_ff);
  const weights = attention ? [] : null;
  for (let l = 0; l < c.n_layers; l++) {
    const p = `layers.${l}`;
    const L = W.layers[l];
    const kv = cache[l];
    layerNormRows(X, n, d, model.t(`${p}.norm1.weight`), model.t(`${p}.norm1.bias`), c.norm_eps, H);
    linear(H, n, d, L.wq, model.t(`${p}.attn.bq`), Q);
    linear(H, n, d, L.wk, model.t(`${p}.attn.bk`), K);
    linear(H, n, d, L.wv, model.t(`${p}.attn.bv`), V);
    kv.append(K, V, n);
    const S = kv.length;
    const first = S - n; // the cache index of the first new query
    let Kr = kv.k;
    if (rotary) {
      const tables = rotaryTables(W.tables, S, hd, c.rotary_base || 10000);
      rotateRows(Q, n, nh, hd, first, tables, c.rotary_layout);
      Kr = Float32Array.from(kv.k.subarray(0, S * kvw));
      rotateRows(Kr, S, nKv, hd, 0, tables, c.rotary_layout);
    }
    const scores = new Float64Array(S);
    C.fill(0);
    const layerWeights = attention ? [] : null;
    for (let r = 0; r < n; r++) {
      const qi = first + r;
      for (let h = 0; h < nh; h++) {
        const qo = r * d + h * hd;
        const ko = Math.floor(h / group) * hd;
        let max = -Infinity;
        for (let s = 0; s < S; s++) {
          const seen = s <= qi && (kv.window === null || qi - s < kv.window || s < kv.sinks);
          if (!seen) {
            scores[s] = -Infinity;
            continue;
          }
          let dot = 0;
          for (let i = 0; i < hd; i++) dot += Q[qo + i] * Kr[s * kvw + ko + i];
          scores[s] = dot * scale;
          if (scores[s] > max) max = scores[s];
        }
        let sum = 0;
        for (let s = 0; s < S; s++) {
          scores[s] = Math.exp(scores[s] - max);
          sum += scores[s];
        }
        for (let s = 0; s < S; s++) {
          const w = scores[s] / sum;
          if (w === 0) continue;
          for (let i = 0; i < hd; i++) C[qo + i] += w * kv.v[s * kvw + ko + i];
        }
        if (layerWeights && r === n - 1) layerWeights.push(Float32Array.from(scores, (x) => x / sum));
      }
    }
    if (layerWeights) weights.push(layerWeights);
    kv.position += n;
    kv.trim();
    linear(C, n, d, L.wo, model.t(`${p}.attn.bo`), O);
    for (let i = 0; i < n * d; i++) X[i] += O[i];
    layerNormRows(X, n, d, model.t(`${p}.norm2.weight`), model.t(`${p}.norm2.bias`), c.norm_eps, H);
    linear(H, n, d, L.w1, model.t(`${p}.ffn.b1`), F);
    for (let i = 0; i < F.length; i++) F[i] = 0.5 * F[i] * (1 + erf(F[i] * Math.SQRT1_2));
    linear(F, n, c.d_ff, L.w2, model.t(`${p}.ffn.b2`), O);
    for (let i = 0; i < n * d; i++) X[i] += O[i];
  }
  const last = new Float32Array(d);
  layerNormRows(X.subarray((n - 1) * d), 1, d, model.t("norm_f.weight"), model.t("norm_f.bias"), c.norm_eps, last);
  const logits = new Float32Array(c.n_vocab);
  linear(last, 1, d, W.head, c.tied_head ? null : model.t("head.bias"), logits);
  return { logits, attention: weights };
}

/**
 * Continue promptIds for maxNewTokens tokens through a rolling cache: yields, for each new
 * token, {id, logits, position (in the stream, of the token whose logits chose it), rows (of
 * the cache, per layer), bytes (of all layers' keys and values), attention}. The prompt is fed
 * `window` tokens at a time (all at once without a window), then one token a step, as
 * scripts/make_window_fixture.py feeds the library. maxNewTokens may be Infinity: the
 * generator then writes until its caller stops reading. options: window (null: full attention),
 * sinks, temperature (0: greedy), topK, topP, seed, attention.
 */
export function* streamSteps(model, promptIds, maxNewTokens, options = {}) {
  const { window = null, sinks = 0, temperature = 1, topK = 0, topP = 1, seed = 0 } = options;
  const cache = rollingCache(model, window, sinks);
  const ids = Array.from(promptIds);
  if (ids.length === 0) throw new RangeError("the prompt must hold at least one token");
  if (maxNewTokens !== Infinity) checkInt(maxNewTokens, "maxNewTokens", 0); // Infinity: without end
  if (!(Number.isFinite(temperature) && temperature >= 0)) {
    throw new RangeError(`temperature must be a number >= 0, got ${temperature}`);
  }
  checkInt(seed, "seed", 0);
  if (maxNewTokens === 0) return;
  const rng = makeRng(seed);
  const attention = Boolean(options.attention);
  const chunk = window ?? ids.length;
  let out;
  for (let i = 0; i < ids.length; i += chunk) out = forwardRolling(model, ids.slice(i, i + chunk), cache, attention);
  for (let n = 0; n < maxNewTokens; n++) {
    const id = pickToken(out.logits, { temperature, topK, topP }, rng);
    ids.push(id);
    yield {
      id, logits: out.logits, attention: out.attention, position: ids.length - 2,
      rows: cache[0].length, bytes: cacheBytes(cache),
    };
    if (n + 1 === maxNewTokens) break;
    out = forwardRolling(model, [id], cache, attention);
  }
}
