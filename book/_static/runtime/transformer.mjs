// transformer.mjs: the book's Transformers, run in the reader's browser (or in node).
//
// One ES module, no dependencies, written to be read after chapters 10 to 13.
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
//   const model = loadModel(manifest, weights)   // parsed JSON, ArrayBuffer
//   model.tokenizer.encode(text) -> ids, model.tokenizer.decode(ids) -> text
//   model.generate(promptIds, maxNewTokens, {temperature, topK, topP, seed}) -> new ids
//   model.translate(text, {beam}) -> text              (translator only)
//   model.steps(...) yields one token at a time, with the attention weights of
//   every layer and head when asked ({attention: true}).
//
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

/** The tensors of a manifest as Float32Arrays: {name: {data, shape}}. */
function readTensors(manifest, buffer) {
  const view = new DataView(buffer);
  const tensors = {};
  for (const [name, t] of Object.entries(manifest.tensors)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    if (t.offset + n * (t.dtype === "float16" ? 2 : 4) > buffer.byteLength) {
      throw new Error(`tensor ${name} lies past the end of the weights (${buffer.byteLength} bytes)`);
    }
    if (t.dtype === "float16") {
      if (!HALF_TABLE) HALF_TABLE = Float32Array.from({ length: 65536 }, (_, h) => halfToFloat(h));
      for (let i = 0; i < n; i++) data[i] = HALF_TABLE[view.getUint16(t.offset + 2 * i, true)];
    } else if (t.dtype === "float32") {
      for (let i = 0; i < n; i++) data[i] = view.getFloat32(t.offset + 4 * i, true);
    } else {
      throw new Error(`tensor ${name}: dtype must be float16 or float32, got ${t.dtype}`);
    }
    tensors[name] = { data, shape: t.shape };
  }
  return tensors;
}

// ---------------------------------------------------------------------------
// The pieces of a block, each on one row vector (one position)
// ---------------------------------------------------------------------------

/**
 * out = x W + b for a row x (n_in) and W (n_in, n_out), given as WT = W^T (n_out rows of
 * n_in: see transposed()), b optional. Each output is one dot product over a contiguous row,
 * summed in double precision in four lanes (faster than one, and at least as accurate as
 * float32).
 */
function linear(x, WT, b, out) {
  const nIn = x.length;
  for (let j = 0; j < out.length; j++) {
    const r = j * nIn;
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let i = 0;
    for (; i + 3 < nIn; i += 4) {
      s0 += x[i] * WT[r + i];
      s1 += x[i + 1] * WT[r + i + 1];
      s2 += x[i + 2] * WT[r + i + 2];
      s3 += x[i + 3] * WT[r + i + 3];
    }
    for (; i < nIn; i++) s0 += x[i] * WT[r + i];
    out[j] = s0 + s1 + (s2 + s3) + (b ? b[j] : 0);
  }
  return out;
}

/** W (n_in, n_out), row-major, as W^T (n_out, n_in): the layout linear() reads. */
function transposed({ data, shape }) {
  const [nIn, nOut] = shape;
  const WT = new Float32Array(data.length);
  for (let i = 0; i < nIn; i++) for (let j = 0; j < nOut; j++) WT[j * nIn + i] = data[i * nOut + j];
  return WT;
}

/** Accessors for a model's tensors: t(name) as stored, m(name) a matrix transposed for linear(). */
function accessors(tensors) {
  const cache = new Map();
  const t = (name) => (tensors[name] ? tensors[name].data : null);
  const m = (name) => {
    if (!cache.has(name)) {
      if (!tensors[name]) throw new Error(`the weights have no tensor ${name}`);
      cache.set(name, transposed(tensors[name]));
    }
    return cache.get(name);
  };
  return { t, m };
}

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
function rmsNorm(x, weight, eps, out) {
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
function silu(v) {
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

/** The sinusoidal position vector of position p (chapter 8): sin on even features, cos on odd. */
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
function rotate(x, start, hd, p, layout, base) {
  const half = hd / 2;
  for (let i = 0; i < half; i++) {
    const angle = p * base ** ((-2 * i) / hd);
    const c = Math.cos(angle);
    const s = Math.sin(angle);
    const a = layout === "half" ? start + i : start + 2 * i;
    const b = layout === "half" ? start + i + half : start + 2 * i + 1;
    const xa = x[a];
    const xb = x[b];
    x[a] = xa * c - xb * s;
    x[b] = xa * s + xb * c;
  }
}

// ---------------------------------------------------------------------------
// Attention with a KV cache
// ---------------------------------------------------------------------------

/**
 * The keys and values one attention layer has seen: rows of nKv * hd floats,
 * appended one position at a time (chapter 12's KV cache, in a flat array).
 */
class KVCache {
  constructor(maxLen, width) {
    this.k = new Float32Array(maxLen * width);
    this.v = new Float32Array(maxLen * width);
    this.width = width;
    this.length = 0;
    this.maxLen = maxLen;
  }

  append(k, v) {
    if (this.length >= this.maxLen) throw new Error(`the KV cache is full (${this.maxLen} positions)`);
    this.k.set(k, this.length * this.width);
    this.v.set(v, this.length * this.width);
    this.length += 1;
  }

  clone() {
    const c = new KVCache(this.maxLen, this.width);
    c.k.set(this.k.subarray(0, this.length * this.width));
    c.v.set(this.v.subarray(0, this.length * this.width));
    c.length = this.length;
    return c;
  }
}

/**
 * Attention of one query row q (nHeads * hd) over the S rows of a cache.
 * Grouped-query attention: query head h reads key/value head floor(h / (nHeads / nKv)),
 * so nKv = nHeads is ordinary multi-head attention and nKv = 1 multi-query attention.
 * Returns the context (nHeads * hd) and, when `weightsOut` is given, fills it with
 * each head's weights over the S positions (nHeads rows of S).
 */
function attend(q, cache, nHeads, nKv, hd, context, weightsOut) {
  const S = cache.length;
  const group = nHeads / nKv;
  const scale = 1 / Math.sqrt(hd);
  const width = nKv * hd;
  const scores = new Float32Array(S);
  context.fill(0);
  for (let h = 0; h < nHeads; h++) {
    const kvOff = Math.floor(h / group) * hd;
    const qOff = h * hd;
    for (let s = 0; s < S; s++) {
      let dot = 0;
      const kRow = s * width + kvOff;
      for (let i = 0; i < hd; i++) dot += q[qOff + i] * cache.k[kRow + i];
      scores[s] = dot * scale;
    }
    softmaxInPlace(scores, S);
    for (let s = 0; s < S; s++) {
      const w = scores[s];
      const vRow = s * width + kvOff;
      for (let i = 0; i < hd; i++) context[qOff + i] += w * cache.v[vRow + i];
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
 * The next token from logits: greedy when temperature is 0, else sampled from
 * softmax(logits / temperature) restricted to the topK most likely tokens and then
 * to the smallest set whose probability reaches topP (nucleus sampling; the most
 * likely token is always kept, as in torch/transformers).
 */
export function pickToken(logits, { temperature = 1, topK = 0, topP = 1 } = {}, rng = Math.random) {
  if (!(temperature > 0)) return argmax(logits);
  const V = logits.length;
  const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => logits[b] - logits[a] || a - b);
  const keep = topK > 0 ? Math.min(topK, V) : V;
  const probs = new Float64Array(keep);
  for (let r = 0; r < keep; r++) probs[r] = logits[order[r]] / temperature;
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
  let total = 0;
  for (let r = 0; r < n; r++) total += probs[r];
  let u = rng() * total;
  for (let r = 0; r < n; r++) {
    u -= probs[r];
    if (u < 0) return order[r];
  }
  return order[n - 1];
}

function checkOptions({ temperature = 1, topK = 0, topP = 1, seed = 0 } = {}) {
  if (!(Number.isFinite(temperature) && temperature >= 0)) {
    throw new RangeError(`temperature must be a number >= 0, got ${temperature}`);
  }
  if (!(Number.isInteger(topK) && topK >= 0)) {
    throw new RangeError(`topK must be an integer >= 0 (0: no limit), got ${topK}`);
  }
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`topP must be in (0, 1], got ${topP}`);
  if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  return { temperature, topK, topP, seed };
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
class DecoderLM {
  constructor(config, tensors, tokenizer) {
    this.config = config;
    this.tokenizer = tokenizer;
    this.maxLen = config.max_len;
    Object.assign(this, accessors(tensors));
    const c = config;
    this.hd = c.d_model / c.n_heads;
    this.nKv = c.n_kv_heads || c.n_heads;
    for (const name of ["tok_emb", "layers.0.attn.wq", "layers.0.ffn.w1"]) {
      if (!tensors[name]) throw new Error(`the weights have no tensor ${name}`);
    }
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
   * Run one token at the next position of `cache`; return its logits (n_vocab) and, when
   * `attention` is true, the weights [layer][head] -> Float32Array over positions 0..pos.
   */
  step(token, cache, attention = false) {
    const c = this.config;
    const d = c.d_model;
    const pos = cache[0].length;
    if (!(Number.isInteger(token) && token >= 0 && token < c.n_vocab)) {
      throw new RangeError(`token must be an integer id in [0, ${c.n_vocab}), got ${token}`);
    }
    if (pos >= this.maxLen) throw new RangeError(`the model reads at most ${this.maxLen} tokens`);
    const x = Float32Array.from(this.t("tok_emb").subarray(token * d, (token + 1) * d));
    if (c.positions === "learned") {
      const pe = this.t("pos_emb");
      for (let i = 0; i < d; i++) x[i] += pe[pos * d + i];
    } else if (c.positions === "sinusoidal") {
      const pe = sinusoid(pos, d);
      for (let i = 0; i < d; i++) x[i] += pe[i];
    }
    const h = new Float32Array(d);
    const q = new Float32Array(d);
    const k = new Float32Array(this.nKv * this.hd);
    const v = new Float32Array(this.nKv * this.hd);
    const context = new Float32Array(d);
    const out = new Float32Array(d);
    const ff1 = new Float32Array(c.d_ff);
    const ff3 = c.ffn === "swiglu" ? new Float32Array(c.d_ff) : null;
    const weights = attention ? [] : null;
    for (let l = 0; l < c.n_layers; l++) {
      const p = `layers.${l}`;
      // attention half: x + W_O attend(norm(x))
      this.norm(x, `${p}.norm1`, h);
      linear(h, this.m(`${p}.attn.wq`), this.t(`${p}.attn.bq`), q);
      linear(h, this.m(`${p}.attn.wk`), this.t(`${p}.attn.bk`), k);
      linear(h, this.m(`${p}.attn.wv`), this.t(`${p}.attn.bv`), v);
      if (c.positions === "rotary") {
        const base = c.rotary_base || 10000;
        for (let hh = 0; hh < c.n_heads; hh++) rotate(q, hh * this.hd, this.hd, pos, c.rotary_layout, base);
        for (let hh = 0; hh < this.nKv; hh++) rotate(k, hh * this.hd, this.hd, pos, c.rotary_layout, base);
      }
      cache[l].append(k, v);
      const layerWeights = attention ? [] : null;
      attend(q, cache[l], c.n_heads, this.nKv, this.hd, context, layerWeights);
      if (attention) weights.push(layerWeights);
      linear(context, this.m(`${p}.attn.wo`), this.t(`${p}.attn.bo`), out);
      for (let i = 0; i < d; i++) x[i] += out[i];
      // feed-forward half: x + FFN(norm(x))
      this.norm(x, `${p}.norm2`, h);
      linear(h, this.m(`${p}.ffn.w1`), this.t(`${p}.ffn.b1`), ff1);
      if (c.ffn === "swiglu") {
        linear(h, this.m(`${p}.ffn.w3`), null, ff3);
        for (let i = 0; i < c.d_ff; i++) ff1[i] = silu(ff1[i]) * ff3[i];
      } else {
        gelu(ff1);
      }
      linear(ff1, this.m(`${p}.ffn.w2`), this.t(`${p}.ffn.b2`), out);
      for (let i = 0; i < d; i++) x[i] += out[i];
    }
    this.norm(x, "norm_f", h);
    return { logits: this.project(h), attention: weights };
  }

  /** Logits from the last hidden row: x W_head + b, or x E^T with a tied embedding. */
  project(h) {
    const c = this.config;
    const logits = new Float32Array(c.n_vocab);
    if (c.tied_head) {
      const E = this.t("tok_emb");
      const d = c.d_model;
      for (let tkn = 0; tkn < c.n_vocab; tkn++) {
        let dot = 0;
        for (let i = 0; i < d; i++) dot += h[i] * E[tkn * d + i];
        logits[tkn] = dot;
      }
      return logits;
    }
    return linear(h, this.m("head.weight"), this.t("head.bias"), logits);
  }

  /** Logits (n_prompt rows) of every position of a prompt, as model.forward returns them. */
  forward(ids) {
    const cache = this.newCache();
    return ids.map((id) => this.step(id, cache).logits);
  }

  /**
   * Continue promptIds one token at a time: yields {id, logits, attention, position} for
   * each new token. attention (when options.attention) holds, for every layer and head,
   * where the position that produced the token looked.
   */
  *steps(promptIds, maxNewTokens, options = {}) {
    const opts = checkOptions(options);
    const ids = Array.from(promptIds);
    if (ids.length === 0) throw new RangeError("the prompt must hold at least one token");
    if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 0)) {
      throw new RangeError(`maxNewTokens must be an integer >= 0, got ${maxNewTokens}`);
    }
    if (ids.length + maxNewTokens > this.maxLen) {
      throw new RangeError(`prompt (${ids.length}) + maxNewTokens (${maxNewTokens}) exceeds the ` +
        `context of ${this.maxLen} tokens`);
    }
    const rng = makeRng(opts.seed);
    const cache = this.newCache();
    let out = null;
    for (let i = 0; i < ids.length - 1; i++) this.step(ids[i], cache);
    let last = ids[ids.length - 1];
    for (let n = 0; n < maxNewTokens; n++) {
      out = this.step(last, cache, Boolean(options.attention));
      last = pickToken(out.logits, opts, rng);
      yield { id: last, logits: out.logits, attention: out.attention, position: cache[0].length - 1 };
      if (options.stopAt !== undefined && last === options.stopAt) return;
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
    this.config = config;
    this.tokenizer = tokenizer;
    this.maxLen = config.max_len;
    Object.assign(this, accessors(tensors));
    this.hd = config.d_model / config.n_heads;
    this.project = DecoderLM.prototype.project;
  }

  norm(x, prefix, out) {
    return layerNorm(x, this.t(`${prefix}.weight`), this.t(`${prefix}.bias`), this.config.norm_eps, out);
  }

  embed(token, pos) {
    const c = this.config;
    const d = c.d_model;
    if (!(Number.isInteger(token) && token >= 0 && token < c.n_vocab)) {
      throw new RangeError(`token must be an integer id in [0, ${c.n_vocab}), got ${token}`);
    }
    const x = Float32Array.from(this.t("tok_emb").subarray(token * d, (token + 1) * d));
    const scale = c.emb_scale || 1;
    const pe = c.positions === "learned" ? this.t("pos_emb").subarray(pos * d, (pos + 1) * d) : sinusoid(pos, d);
    for (let i = 0; i < d; i++) x[i] = x[i] * scale + pe[i];
    return x;
  }

  /** A residual sub-layer: pre-LN x + f(LN(x)) or post-LN LN(x + f(x)). */
  residual(x, normName, f) {
    const d = this.config.d_model;
    const h = new Float32Array(d);
    if (this.config.norm_position === "post") {
      const y = f(x);
      for (let i = 0; i < d; i++) h[i] = x[i] + y[i];
      this.norm(h, normName, x);
    } else {
      const y = f(this.norm(x, normName, h));
      for (let i = 0; i < d; i++) x[i] += y[i];
    }
  }

  ffn(prefix) {
    return (h) => {
      const ff = linear(h, this.m(`${prefix}.w1`), this.t(`${prefix}.b1`), new Float32Array(this.config.d_ff));
      if (this.config.activation === "relu") for (let i = 0; i < ff.length; i++) ff[i] = Math.max(0, ff[i]);
      else gelu(ff);
      return linear(ff, this.m(`${prefix}.w2`), this.t(`${prefix}.b2`), new Float32Array(this.config.d_model));
    };
  }

  /** The encoder's output rows (S rows of d_model) for source ids: bidirectional self-attention. */
  encode(srcIds) {
    const c = this.config;
    const d = c.d_model;
    let rows = srcIds.map((id, pos) => this.embed(id, pos));
    for (let l = 0; l < c.n_enc_layers; l++) {
      const p = `enc.${l}`;
      // every position attends to every other: fill one cache with all keys, then query it
      const cache = new KVCache(rows.length, d);
      const normed = rows.map((x) => (c.norm_position === "post" ? x : this.norm(x, `${p}.norm1`, new Float32Array(d))));
      for (const h of normed) {
        cache.append(linear(h, this.m(`${p}.self.wk`), this.t(`${p}.self.bk`), new Float32Array(d)),
          linear(h, this.m(`${p}.self.wv`), this.t(`${p}.self.bv`), new Float32Array(d)));
      }
      rows = rows.map((x, s) => {
        const y = Float32Array.from(x);
        const attn = () => {
          const q = linear(normed[s], this.m(`${p}.self.wq`), this.t(`${p}.self.bq`), new Float32Array(d));
          const ctx = attend(q, cache, c.n_heads, c.n_heads, this.hd, new Float32Array(d), null);
          return linear(ctx, this.m(`${p}.self.wo`), this.t(`${p}.self.bo`), new Float32Array(d));
        };
        this.residual(y, `${p}.norm1`, attn);
        this.residual(y, `${p}.norm2`, this.ffn(`${p}.ffn`));
        return y;
      });
    }
    if (c.norm_position !== "post" && this.t("enc_norm.weight")) {
      rows = rows.map((x) => this.norm(x, "enc_norm", new Float32Array(d)));
    }
    return rows;
  }

  /** Decoder state for one sentence: self-attention caches, and cross-attention keys/values computed once. */
  newState(memory) {
    const c = this.config;
    const d = c.d_model;
    const self = [];
    const cross = [];
    for (let l = 0; l < c.n_dec_layers; l++) {
      self.push(new KVCache(this.maxLen, d));
      const kv = new KVCache(memory.length, d);
      for (const m of memory) {
        kv.append(linear(m, this.m(`dec.${l}.cross.wk`), this.t(`dec.${l}.cross.bk`), new Float32Array(d)),
          linear(m, this.m(`dec.${l}.cross.wv`), this.t(`dec.${l}.cross.bv`), new Float32Array(d)));
      }
      cross.push(kv);
    }
    return { self, cross };
  }

  /** One decoder step: logits for the next target token, and the cross-attention weights [layer][head]. */
  step(token, state) {
    const c = this.config;
    const d = c.d_model;
    const pos = state.self[0].length;
    if (pos >= this.maxLen) throw new RangeError(`the decoder reads at most ${this.maxLen} tokens`);
    const x = this.embed(token, pos);
    const crossWeights = [];
    for (let l = 0; l < c.n_dec_layers; l++) {
      const p = `dec.${l}`;
      this.residual(x, `${p}.norm1`, (h) => {
        const q = linear(h, this.m(`${p}.self.wq`), this.t(`${p}.self.bq`), new Float32Array(d));
        state.self[l].append(linear(h, this.m(`${p}.self.wk`), this.t(`${p}.self.bk`), new Float32Array(d)),
          linear(h, this.m(`${p}.self.wv`), this.t(`${p}.self.bv`), new Float32Array(d)));
        const ctx = attend(q, state.self[l], c.n_heads, c.n_heads, this.hd, new Float32Array(d), null);
        return linear(ctx, this.m(`${p}.self.wo`), this.t(`${p}.self.bo`), new Float32Array(d));
      });
      this.residual(x, `${p}.norm2`, (h) => {
        const q = linear(h, this.m(`${p}.cross.wq`), this.t(`${p}.cross.bq`), new Float32Array(d));
        const w = [];
        const ctx = attend(q, state.cross[l], c.n_heads, c.n_heads, this.hd, new Float32Array(d), w);
        crossWeights.push(w);
        return linear(ctx, this.m(`${p}.cross.wo`), this.t(`${p}.cross.bo`), new Float32Array(d));
      });
      this.residual(x, `${p}.norm3`, this.ffn(`${p}.ffn`));
    }
    const h = c.norm_position !== "post" && this.t("dec_norm.weight") ? this.norm(x, "dec_norm", new Float32Array(d)) : x;
    return { logits: this.project(h), cross: crossWeights };
  }

  /**
   * Target ids for source ids: greedy (beam 1) or beam search with a length penalty
   * ((5 + n) / 6)^alpha (Wu et al., 2016), stopping at eos_id or maxLen.
   * Returns {ids, cross}: cross[t][layer][head] is the weight row over the source tokens.
   */
  decode(srcIds, { beam = 1, lengthPenalty = 0.6, maxLen = this.maxLen } = {}) {
    const c = this.config;
    if (!(Number.isInteger(beam) && beam >= 1)) throw new RangeError(`beam must be an integer >= 1, got ${beam}`);
    const memory = this.encode(srcIds);
    // as the library: at most max_len - 1 target tokens, and 2 S + 10 for a source of S
    const limit = Math.min(maxLen - 1, this.maxLen - 1, 2 * srcIds.length + 10);
    if (beam === 1) {
      const state = this.newState(memory);
      const ids = [];
      const cross = [];
      let token = c.bos_id;
      while (ids.length < limit) {
        const out = this.step(token, state);
        token = argmax(out.logits);
        if (token === c.eos_id) break;
        ids.push(token);
        cross.push(out.cross);
      }
      return { ids, cross };
    }
    const logSoftmax = (z) => {
      let m = -Infinity;
      for (const v of z) m = Math.max(m, v);
      let s = 0;
      for (const v of z) s += Math.exp(v - m);
      const lse = m + Math.log(s);
      return Array.from(z, (v) => v - lse);
    };
    const penalty = (n) => ((5 + n) / 6) ** lengthPenalty;
    let beams = [{ ids: [], cross: [], score: 0, state: this.newState(memory), last: c.bos_id }];
    const finished = [];
    for (let t = 0; t < limit && beams.length; t++) {
      const candidates = [];
      for (const b of beams) {
        const out = this.step(b.last, b.state);
        const lp = logSoftmax(out.logits);
        const order = lp.map((v, i) => i).sort((i, j) => lp[j] - lp[i]).slice(0, beam);
        for (const tok of order) candidates.push({ from: b, tok, score: b.score + lp[tok], cross: out.cross });
      }
      candidates.sort((a, b) => b.score - a.score);
      beams = [];
      for (const cand of candidates) {
        if (cand.tok === c.eos_id) {
          finished.push({ ids: cand.from.ids, cross: cand.from.cross, score: cand.score / penalty(cand.from.ids.length + 1) });
        } else if (beams.length < beam) {
          const state = { self: cand.from.state.self.map((k) => k.clone()), cross: cand.from.state.cross };
          beams.push({ ids: [...cand.from.ids, cand.tok], cross: [...cand.from.cross, cand.cross], score: cand.score, state, last: cand.tok });
        }
        if (beams.length >= beam && finished.length >= beam) break;
      }
      const bestFinished = Math.max(-Infinity, ...finished.map((f) => f.score));
      if (finished.length >= beam && beams.every((b) => b.score / penalty(limit) < bestFinished)) break;
    }
    for (const b of beams) finished.push({ ids: b.ids, cross: b.cross, score: b.score / penalty(b.ids.length) });
    finished.sort((a, b) => b.score - a.score);
    return { ids: finished[0].ids, cross: finished[0].cross };
  }

  /** English in, French out: the tokenizer around decode(). */
  translate(text, { beam = 1, lengthPenalty = 0.6, details = false } = {}) {
    // as the library's translate_sentences: a source longer than max_source_tokens is cut
    const full = this.tokenizer.encode(text, { source: true });
    const most = Math.min(this.maxLen, this.config.max_source_tokens || this.maxLen);
    const src = full.slice(0, most);
    const truncated = full.length > most;
    if (src.length === 0) return details ? { text: "", src, ids: [], cross: [], truncated } : "";
    const out = this.decode(src, { beam, lengthPenalty });
    const french = this.tokenizer.decode(out.ids);
    return details ? { text: french, src, ids: out.ids, cross: out.cross, truncated } : french;
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

  piece(id) {
    return this.chars[id];
  }
}

/**
 * llama2.c's tokenizer (SentencePiece BPE with byte fallback): a leading space, one
 * token per character ("▁" for a space), bytes <0xXX> for characters not in the vocabulary,
 * then repeatedly merge the adjacent pair whose merged piece has the highest score.
 */
export class Llama2cTokenizer {
  constructor({ tokens, scores, bos_id = 1, eos_id = 2 }) {
    this.tokens = tokens;
    this.scores = scores;
    this.bosId = bos_id;
    this.eosId = eos_id;
    this.lookup = new Map(tokens.map((t, i) => [t, i]));
    this.vocabSize = tokens.length;
    this.wordLocal = !tokens.some((t) => /[^▁]▁/u.test(t));
    this.cache = new Map();
  }

  /** Ids of text, after a BOS token when bos is true (what llama2.c feeds its model). */
  encode(text, { bos = true } = {}) {
    const ids = bos ? [this.bosId] : [];
    if (text === "") return ids;
    const s = "▁" + text.replaceAll(" ", "▁");
    if (!this.wordLocal) return ids.concat(this.merge(s));
    // No piece has "▁" after another character, so no merge crosses the start of a word
    // (a run of "▁" and what follows it): merging word by word gives the same ids as merging
    // the whole text, in linear rather than quadratic time for a long text.
    for (const word of s.match(/▁*[^▁]*/gu).filter(Boolean)) {
      if (!this.cache.has(word)) this.cache.set(word, this.merge(word));
      ids.push(...this.cache.get(word));
    }
    return ids;
  }

  /** One id per character (bytes for unknown ones), then the best-scoring merges, leftmost first. */
  merge(s) {
    const pieces = [];
    for (const ch of s) {
      const id = this.lookup.get(ch);
      if (id !== undefined) pieces.push(id);
      else for (const byte of new TextEncoder().encode(ch)) pieces.push(byte + 3); // <0x00> is id 3
    }
    for (;;) {
      let best = -Infinity;
      let at = -1;
      let merged = -1;
      for (let i = 0; i + 1 < pieces.length; i++) {
        const id = this.lookup.get(this.tokens[pieces[i]] + this.tokens[pieces[i + 1]]);
        if (id !== undefined && this.scores[id] > best) {
          best = this.scores[id];
          at = i;
          merged = id;
        }
      }
      if (at < 0) break;
      pieces.splice(at, 2, merged);
    }
    return pieces;
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
    let parts = Array.from(word);
    for (;;) {
      let best = Infinity;
      let at = -1;
      for (let i = 0; i + 1 < parts.length; i++) {
        const r = this.ranks.get(parts[i] + " " + parts[i + 1]);
        if (r !== undefined && r < best) {
          best = r;
          at = i;
        }
      }
      if (at < 0) break;
      parts.splice(at, 2, parts[at] + parts[at + 1]);
    }
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
 * weights (an ArrayBuffer of the .bin file beside it).
 */
export function loadModel(manifest, weights) {
  if (!manifest || typeof manifest !== "object" || !manifest.config || !manifest.tensors) {
    throw new TypeError("manifest must be the parsed JSON of a model (config, tokenizer, tensors)");
  }
  let buffer = weights;
  if (ArrayBuffer.isView(weights)) {
    buffer = weights.buffer.slice(weights.byteOffset, weights.byteOffset + weights.byteLength);
  }
  if (!(buffer instanceof ArrayBuffer)) throw new TypeError("weights must be an ArrayBuffer");
  if (manifest.bytes !== undefined && buffer.byteLength !== manifest.bytes) {
    throw new Error(`the weights are ${buffer.byteLength} bytes but the manifest says ${manifest.bytes}`);
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
