// train.mjs: train the book's decoder-only Transformer (TinyGPT) in the reader's browser
// (or in node). No dependencies beyond its sibling modules.
//
// The model is attention_lib.models.TinyGPT without dropout: token embedding, learned
// (or rotary) positions, n_layers pre-LN blocks x + MHA(LN(x)), x + FFN(LN(x)), a final
// LayerNorm and the output layer. forward() keeps what backward() needs; backward() fills
// `grads` (same names as `params`, the library's checkpoint names: tok.E, pos.E,
// blocks.i.ln1.gamma, blocks.i.attn.W_Q, ..., blocks.i.ffn.fc1.W, ln_f.gamma, head.W);
// trainStep() is the library's train_step: forward, cross-entropy, backward, clip, AdamW.
// toRuntime() writes the manifest and weights transformer.mjs's loadModel() reads, so a
// model trained here can generate.
//
//   const model = new TinyGPT({n_vocab, d_model, n_heads, n_layers, d_ff, max_len,
//                              positions: "learned" | "rotary", seed})
//   const opt = new AdamW(model.params, {lr, betas});
//   const loss = trainStep(model, opt, tokens, targets, B, T, {clip, lr});

import { makeRng, readTensors, sha256Hex } from "./transformer.mjs";
import {
  attentionBackward, attentionForward, crossEntropy, embeddingBackward, embeddingForward,
  geluBackward, geluForward, layerNormBackward, layerNormForward, linearBackward,
  linearForward, rotaryTables, rotate, transpose,
} from "./train-layers.mjs";
import { AdamW, clipGradNorm, learningRate } from "./train-optim.mjs";

export { AdamW, clipGradNorm, learningRate };

export const FORMAT = "attention-from-scratch runtime model, version 1";
const EPS = 1e-5;

/** Normal draws from a seeded uniform PRNG (Box-Muller). */
function normals(rng) {
  let spare = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    const u = 1 - rng();
    const r = Math.sqrt(-2 * Math.log(u));
    const angle = 2 * Math.PI * rng();
    spare = r * Math.sin(angle);
    return r * Math.cos(angle);
  };
}

const SIZES = ["n_vocab", "d_model", "n_heads", "n_layers", "d_ff", "max_len"];
/** The largest model the page will build: a few million parameters. */
export const MAX_PARAMS = 4_000_000;

/** A config with every size a positive integer, checked before anything is allocated. */
export function checkConfig(config) {
  if (!config || typeof config !== "object") throw new TypeError("config must be an object of sizes");
  for (const k of SIZES) {
    if (!(Number.isInteger(config[k]) && config[k] >= 1)) throw new RangeError(`config.${k} must be an integer >= 1, got ${config[k]}`);
  }
  const { d_model: d, n_heads: H } = config;
  if (d % H) throw new RangeError(`config.n_heads (${H}) must divide config.d_model (${d})`);
  const positions = config.positions ?? "learned";
  if (!["learned", "rotary"].includes(positions)) throw new RangeError(`config.positions must be "learned" or "rotary", got ${positions}`);
  if (positions === "rotary" && (d / H) % 2) throw new RangeError(`rotary positions need an even head size, got ${d / H}`);
  const n = countParams(config);
  if (n > MAX_PARAMS) throw new RangeError(`the model would have ${n} parameters, over the ${MAX_PARAMS} a page can train`);
  return { ...config, positions };
}

/** {name: shape} of every parameter, in the library's order (TinyGPT.layers()). */
export function paramShapes(config) {
  const { n_vocab: V, d_model: d, d_ff: f, max_len: W } = config;
  const shapes = { "tok.E": [V, d] };
  if ((config.positions ?? "learned") === "learned") shapes["pos.E"] = [W, d];
  for (let l = 0; l < config.n_layers; l++) {
    const p = `blocks.${l}`;
    Object.assign(shapes, {
      [`${p}.ln1.gamma`]: [d], [`${p}.ln1.beta`]: [d],
      [`${p}.attn.W_Q`]: [d, d], [`${p}.attn.b_Q`]: [d], [`${p}.attn.W_K`]: [d, d], [`${p}.attn.b_K`]: [d],
      [`${p}.attn.W_V`]: [d, d], [`${p}.attn.b_V`]: [d], [`${p}.attn.W_O`]: [d, d], [`${p}.attn.b_O`]: [d],
      [`${p}.ln2.gamma`]: [d], [`${p}.ln2.beta`]: [d],
      [`${p}.ffn.fc1.W`]: [d, f], [`${p}.ffn.fc1.b`]: [f], [`${p}.ffn.fc2.W`]: [f, d], [`${p}.ffn.fc2.b`]: [d],
    });
  }
  return Object.assign(shapes, { "ln_f.gamma": [d], "ln_f.beta": [d], "head.W": [d, V], "head.b": [V] });
}

export function countParams(config) {
  return Object.values(paramShapes(config)).reduce((a, s) => a + s.reduce((x, y) => x * y, 1), 0);
}

export class TinyGPT {
  /**
   * config: the sizes (as the library's TinyGPT), positions ("learned" or "rotary"),
   * seed (weights drawn as the library draws them: embeddings N(0, 1), weights
   * N(0, 1 / n_in), biases 0, LayerNorm gamma 1 and beta 0), dtype "float32" (default)
   * or "float64". params: {name: array} to start from instead (a fixture, a checkpoint).
   */
  constructor(config, { params = null, dtype = "float32" } = {}) {
    this.config = checkConfig(config);
    this.Array = dtype === "float64" ? Float64Array : Float32Array;
    this.shapes = paramShapes(this.config);
    this.params = {};
    this.grads = {};
    const draw = normals(makeRng(config.seed ?? 0));
    for (const [name, shape] of Object.entries(this.shapes)) {
      const n = shape.reduce((a, b) => a * b, 1);
      const a = new this.Array(n);
      if (params) {
        const src = params[name];
        if (!src || src.length !== n) throw new RangeError(`params.${name} must hold ${n} numbers (shape [${shape}])`);
        a.set(src);
      } else if (name.endsWith(".E")) {
        for (let i = 0; i < n; i++) a[i] = draw();
      } else if (/\.W(_.)?$/.test(name)) {
        const s = 1 / Math.sqrt(shape[0]);
        for (let i = 0; i < n; i++) a[i] = s * draw();
      } else if (name.endsWith(".gamma")) {
        a.fill(1);
      }
      this.params[name] = a;
      this.grads[name] = new this.Array(n);
    }
    const hd = this.config.d_model / this.config.n_heads;
    this.rotary = this.config.positions === "rotary" ? rotaryTables(this.config.max_len, hd) : null;
    this.saved = null;
    this.buffers = null;
    this.frozen = null; // names of weights given no gradient (LoRA's base): see backward()
    this.lora = null; // a LoRA of train-lora.mjs, when one adapts this model
  }

  /** The transposes the forward products read, refreshed after the weights change. */
  transposes() {
    const out = (this.transposed ??= {}); // arrays kept from call to call: refilled, not reallocated
    for (const [name, shape] of Object.entries(this.shapes)) {
      if (shape.length === 2 && !name.endsWith(".E")) out[name] = transpose(this.params[name], shape[0], shape[1], out[name]);
    }
    return out;
  }

  /**
   * Buffers for a batch of B sequences of T, allocated once per (B, T) and kept (training
   * and the held-out batches of another size then reuse theirs), at most four shapes.
   */
  allocate(B, T) {
    const key = `${B}x${T}`;
    this.allBuffers ??= new Map();
    if (this.allBuffers.has(key)) return (this.buffers = this.allBuffers.get(key));
    if (this.allBuffers.size >= 4) this.allBuffers.clear();
    const { d_model: d, d_ff: f, n_heads: H, n_vocab: V, n_layers } = this.config;
    const n = B * T;
    const A = this.Array;
    const layers = Array.from({ length: n_layers }, () => ({
      x: new A(n * d), h1: new A(n * d), xHat1: new A(n * d), inv1: new A(n),
      q: new A(n * d), k: new A(n * d), v: new A(n * d), P: new A(B * H * T * T), ctx: new A(n * d),
      x2: new A(n * d), h2: new A(n * d), xHat2: new A(n * d), inv2: new A(n),
      f1: new A(n * f), a: new A(n * f), cdf: new A(n * f), pdf: new A(n * f),
    }));
    this.buffers = {
      B, T, layers,
      x: new A(n * d), o: new A(n * d), hf: new A(n * d), xHatF: new A(n * d), invF: new A(n),
      logits: new A(n * V), dLogits: new A(n * V),
      g: new A(n * d), gh: new A(n * d), gf: new A(n * f), dq: new A(n * d), dk: new A(n * d), dv: new A(n * d),
      dctx: new A(n * d), gx: new A(n * d),
      scratch: { d: { xT: new A(n * d), gT: new A(n * d) }, f: { xT: new A(n * f), gT: new A(n * d) },
        fin: { xT: new A(n * d), gT: new A(n * f) }, V: { xT: new A(n * d), gT: new A(n * V) } },
    };
    this.allBuffers.set(key, this.buffers);
    return this.buffers;
  }

  /**
   * Logits (B T, n_vocab) for tokens (B T integers, B sequences of T), keeping what
   * backward() needs. Attention weights of layer l: this.buffers.layers[l].P (B, H, T, T).
   */
  forward(tokens, B, T) {
    const c = this.config;
    const { d_model: d, d_ff: f, n_heads: H, n_vocab: V } = c;
    if (!(Number.isInteger(B) && B >= 1 && Number.isInteger(T) && T >= 1 && T <= c.max_len)) {
      throw new RangeError(`B must be >= 1 and T in [1, ${c.max_len}], got B = ${B}, T = ${T}`);
    }
    if (tokens.length !== B * T) throw new RangeError(`tokens must hold B T = ${B * T} ids, got ${tokens.length}`);
    for (let i = 0; i < tokens.length; i++) {
      if (!(Number.isInteger(tokens[i]) && tokens[i] >= 0 && tokens[i] < V)) {
        throw new RangeError(`tokens must be integers in [0, ${V}), got ${tokens[i]} at ${i}`);
      }
    }
    const n = B * T;
    const p = this.params;
    const WT = this.transposes();
    const buf = this.allocate(B, T);
    const hd = d / H;
    let x = buf.x;
    embeddingForward(p["tok.E"], tokens, d, x, c.positions === "learned" ? p["pos.E"] : null, T);
    for (let l = 0; l < c.n_layers; l++) {
      const s = buf.layers[l];
      const pre = `blocks.${l}`;
      s.x.set(x);
      layerNormForward(s.x, n, d, p[`${pre}.ln1.gamma`], p[`${pre}.ln1.beta`], EPS, s.h1, s.xHat1, s.inv1);
      linearForward(s.h1, n, d, WT[`${pre}.attn.W_Q`], p[`${pre}.attn.b_Q`], d, s.q);
      linearForward(s.h1, n, d, WT[`${pre}.attn.W_K`], p[`${pre}.attn.b_K`], d, s.k);
      linearForward(s.h1, n, d, WT[`${pre}.attn.W_V`], p[`${pre}.attn.b_V`], d, s.v);
      if (this.rotary) {
        rotate(s.q, n, d, T, hd, this.rotary);
        rotate(s.k, n, d, T, hd, this.rotary);
      }
      attentionForward(s.q, s.k, s.v, B, T, H, hd, s.ctx, s.P);
      linearForward(s.ctx, n, d, WT[`${pre}.attn.W_O`], p[`${pre}.attn.b_O`], d, buf.o);
      for (let i = 0; i < n * d; i++) s.x2[i] = s.x[i] + buf.o[i];
      layerNormForward(s.x2, n, d, p[`${pre}.ln2.gamma`], p[`${pre}.ln2.beta`], EPS, s.h2, s.xHat2, s.inv2);
      linearForward(s.h2, n, d, WT[`${pre}.ffn.fc1.W`], p[`${pre}.ffn.fc1.b`], f, s.f1);
      geluForward(s.f1, s.a, s.cdf, s.pdf);
      linearForward(s.a, n, f, WT[`${pre}.ffn.fc2.W`], p[`${pre}.ffn.fc2.b`], d, buf.o);
      for (let i = 0; i < n * d; i++) x[i] = s.x2[i] + buf.o[i];
    }
    layerNormForward(x, n, d, p["ln_f.gamma"], p["ln_f.beta"], EPS, buf.hf, buf.xHatF, buf.invF);
    linearForward(buf.hf, n, d, WT["head.W"], p["head.b"], V, buf.logits);
    this.saved = { tokens, B, T };
    return buf.logits;
  }

  /** Fill `grads` from d loss / d logits (B T, n_vocab), after forward(). */
  backward(dLogits) {
    if (!this.saved) throw new Error("backward() needs a forward() first");
    const c = this.config;
    const { d_model: d, d_ff: f, n_heads: H, n_vocab: V } = c;
    const { tokens, B, T } = this.saved;
    const n = B * T;
    const p = this.params, gr = this.grads, buf = this.buffers;
    const hd = d / H;
    for (const g of Object.values(gr)) g.fill(0);
    // a frozen weight (this.frozen, set by train-lora.mjs's LoRA) gets no gradient: only the
    // input's is computed through it, as the library's lora.freeze does
    const G = (name) => (this.frozen?.has(name) ? null : gr[name]);
    const g = buf.g; // d loss / d x, the residual stream, carried down
    linearBackward(buf.hf, n, d, p["head.W"], dLogits, V, G("head.W"), G("head.b"), buf.gh, buf.scratch.V);
    layerNormBackward(buf.gh, n, d, p["ln_f.gamma"], buf.xHatF, buf.invF, gr["ln_f.gamma"], gr["ln_f.beta"], g);
    for (let l = c.n_layers - 1; l >= 0; l--) {
      const s = buf.layers[l];
      const pre = `blocks.${l}`;
      // x3 = x2 + FFN(LN2(x2)): g reaches x2 directly and through the branch
      linearBackward(s.a, n, f, p[`${pre}.ffn.fc2.W`], g, d, G(`${pre}.ffn.fc2.W`), G(`${pre}.ffn.fc2.b`), buf.gf, buf.scratch.f);
      geluBackward(s.f1, buf.gf, buf.gf, s.cdf, s.pdf);
      linearBackward(s.h2, n, d, p[`${pre}.ffn.fc1.W`], buf.gf, f, G(`${pre}.ffn.fc1.W`), G(`${pre}.ffn.fc1.b`), buf.gh, buf.scratch.fin);
      layerNormBackward(buf.gh, n, d, p[`${pre}.ln2.gamma`], s.xHat2, s.inv2, gr[`${pre}.ln2.gamma`], gr[`${pre}.ln2.beta`], buf.gx);
      for (let i = 0; i < n * d; i++) g[i] += buf.gx[i];
      // x2 = x + W_O attend(LN1(x))
      linearBackward(s.ctx, n, d, p[`${pre}.attn.W_O`], g, d, G(`${pre}.attn.W_O`), G(`${pre}.attn.b_O`), buf.dctx, buf.scratch.d);
      attentionBackward(buf.dctx, s.q, s.k, s.v, s.P, B, T, H, hd, buf.dq, buf.dk, buf.dv);
      if (this.rotary) {
        rotate(buf.dq, n, d, T, hd, this.rotary, true);
        rotate(buf.dk, n, d, T, hd, this.rotary, true);
      }
      linearBackward(s.h1, n, d, p[`${pre}.attn.W_Q`], buf.dq, d, G(`${pre}.attn.W_Q`), G(`${pre}.attn.b_Q`), buf.gh, buf.scratch.d);
      for (let i = 0; i < n * d; i++) buf.gx[i] = buf.gh[i];
      linearBackward(s.h1, n, d, p[`${pre}.attn.W_K`], buf.dk, d, G(`${pre}.attn.W_K`), G(`${pre}.attn.b_K`), buf.gh, buf.scratch.d);
      for (let i = 0; i < n * d; i++) buf.gx[i] += buf.gh[i];
      linearBackward(s.h1, n, d, p[`${pre}.attn.W_V`], buf.dv, d, G(`${pre}.attn.W_V`), G(`${pre}.attn.b_V`), buf.gh, buf.scratch.d);
      for (let i = 0; i < n * d; i++) buf.gx[i] += buf.gh[i];
      layerNormBackward(buf.gx, n, d, p[`${pre}.ln1.gamma`], s.xHat1, s.inv1, gr[`${pre}.ln1.gamma`], gr[`${pre}.ln1.beta`], buf.gh);
      for (let i = 0; i < n * d; i++) g[i] += buf.gh[i];
    }
    embeddingBackward(g, tokens, d, gr["tok.E"], c.positions === "learned" ? gr["pos.E"] : null, T);
  }

  /** Mean cross-entropy of the next-token targets (-1: not scored), no gradient. */
  loss(tokens, targets, B, T) {
    return crossEntropy(this.forward(tokens, B, T), targets, this.config.n_vocab, null).loss;
  }

  /** Attention weights of the last forward(), layer l, sequence b, head h: (T, T). */
  attention(l, b = 0, h = 0) {
    const { B, T } = this.saved;
    const H = this.config.n_heads;
    if (!(b < B && h < H)) throw new RangeError(`no sequence ${b} or head ${h}`);
    const P = this.buffers.layers[l].P;
    return P.subarray((b * H + h) * T * T, (b * H + h + 1) * T * T);
  }

  /**
   * The manifest and weights (float32) of this model for transformer.mjs's loadModel:
   * {manifest, weights: ArrayBuffer}. tokenizer: {type: "chars", chars}.
   */
  toRuntime(name, tokenizer, extra = {}) {
    const c = this.config;
    const p = this.params;
    const t = { tok_emb: p["tok.E"] };
    const shapes = { tok_emb: [c.n_vocab, c.d_model] };
    if (c.positions === "learned") Object.assign(t, { pos_emb: p["pos.E"] }), (shapes.pos_emb = [c.max_len, c.d_model]);
    const d = c.d_model, f = c.d_ff;
    for (let l = 0; l < c.n_layers; l++) {
      const src = `blocks.${l}`, dst = `layers.${l}`;
      const pairs = [
        ["norm1.weight", "ln1.gamma", [d]], ["norm1.bias", "ln1.beta", [d]],
        ["attn.wq", "attn.W_Q", [d, d]], ["attn.bq", "attn.b_Q", [d]], ["attn.wk", "attn.W_K", [d, d]], ["attn.bk", "attn.b_K", [d]],
        ["attn.wv", "attn.W_V", [d, d]], ["attn.bv", "attn.b_V", [d]], ["attn.wo", "attn.W_O", [d, d]], ["attn.bo", "attn.b_O", [d]],
        ["norm2.weight", "ln2.gamma", [d]], ["norm2.bias", "ln2.beta", [d]],
        ["ffn.w1", "ffn.fc1.W", [d, f]], ["ffn.b1", "ffn.fc1.b", [f]], ["ffn.w2", "ffn.fc2.W", [f, d]], ["ffn.b2", "ffn.fc2.b", [d]],
      ];
      for (const [to, from, shape] of pairs) {
        t[`${dst}.${to}`] = p[`${src}.${from}`];
        shapes[`${dst}.${to}`] = shape;
      }
    }
    Object.assign(t, { "norm_f.weight": p["ln_f.gamma"], "norm_f.bias": p["ln_f.beta"], "head.weight": p["head.W"], "head.bias": p["head.b"] });
    Object.assign(shapes, { "norm_f.weight": [d], "norm_f.bias": [d], "head.weight": [d, c.n_vocab], "head.bias": [c.n_vocab] });
    const total = Object.values(t).reduce((a, x) => a + x.length, 0);
    const weights = new ArrayBuffer(total * 4);
    const view = new Float32Array(weights);
    const tensors = {};
    let offset = 0;
    for (const [key, arr] of Object.entries(t)) {
      for (let i = 0; i < arr.length; i++) {
        if (!Number.isFinite(arr[i])) throw new RangeError(`tensor ${key} holds NaN or infinity: the model diverged`);
      }
      view.set(arr, offset / 4);
      tensors[key] = { shape: shapes[key], dtype: "float32", offset };
      offset += arr.length * 4;
    }
    const config = {
      arch: "decoder", n_vocab: c.n_vocab, d_model: d, n_heads: c.n_heads, n_kv_heads: c.n_heads,
      n_layers: c.n_layers, d_ff: f, max_len: c.max_len, norm: "layernorm", norm_eps: EPS, ffn: "gelu",
      positions: c.positions, rotary_layout: "interleaved", tied_head: false,
    };
    const manifest = {
      format: FORMAT, name, config, tokenizer, bytes: weights.byteLength, sha256: sha256Hex(weights),
      source: { trained: "in the browser, by book/_static/runtime/train.mjs", ...extra }, tensors,
    };
    return { manifest, weights };
  }
}

/** The gradients' global L2 norm (what clipGradNorm measures), without scaling them. */
function gradNorm(grads) {
  let sq = 0;
  for (const g of Object.values(grads)) for (let i = 0; i < g.length; i++) sq += g[i] * g[i];
  return Math.sqrt(sq);
}

/**
 * One training step on a batch, the library's train_step: forward, cross-entropy over the
 * targets (-1: not scored), backward, clip the gradients' norm to `clip`, AdamW at `lr`.
 * A loss or gradient norm that is not finite (clipping on or off) leaves the weights as
 * they were and throws a RangeError saying so (the widgets show it; they never draw a NaN).
 * Returns {loss, norm} (the norm before clipping).
 */
export function trainStep(model, opt, tokens, targets, B, T, { clip = 1.0, lr = opt.lr } = {}) {
  const lora = model.lora; // LoRA (train-lora.mjs): only its A and B learn, opt holds them
  if (lora) lora.install(); // W = W0 + scaling A B, as the library's forward installs it
  const logits = model.forward(tokens, B, T);
  const buf = model.buffers;
  const { loss } = crossEntropy(logits, targets, model.config.n_vocab, buf.dLogits);
  if (!Number.isFinite(loss)) throw new RangeError(`the loss is ${loss}: the model diverged (try a smaller learning rate)`);
  model.backward(buf.dLogits);
  if (lora) lora.gradsFrom(model.grads); // dA = scaling dW B^T, dB = scaling A^T dW
  const grads = lora ? lora.grads : model.grads;
  // the norm is checked with clipping off too (clip 0): AdamW turns an infinite gradient
  // into NaN weights, which no later step could undo
  const norm = clip ? clipGradNorm(grads, clip) : gradNorm(grads);
  if (!Number.isFinite(norm)) throw new RangeError(`the gradient's norm is ${norm}: the step was refused (try a smaller learning rate)`);
  opt.lr = lr;
  opt.step(grads);
  if (lora) lora.install(); // the model's weights current again (for held-out losses, Generate)
  return { loss, norm };
}

/**
 * The parameters of a runtime model (the manifest and weights toRuntime writes, and
 * scripts/export_models.py: book/_static/models/shakespeare.json) in train.mjs's names, to
 * start a TinyGPT from: {config, params, chars}. The weights' sha256 is checked, and the
 * model must be one train.mjs trains (a LayerNorm, GELU decoder with its own output layer).
 */
export function fromRuntime(manifest, weights) {
  const c = manifest?.config;
  if (!c || manifest.format !== FORMAT || !manifest.tensors) throw new TypeError("not a runtime model's manifest (its format, config and tensors)");
  const fits = c.arch === "decoder" && c.norm === "layernorm" && c.ffn === "gelu" && !c.tied_head && c.n_kv_heads === c.n_heads &&
    (c.positions !== "rotary" || c.rotary_layout === "interleaved");
  if (!fits) throw new RangeError(`the model ${manifest.name} is not a TinyGPT (a LayerNorm, GELU decoder): train.mjs cannot train it`);
  if (!(weights instanceof ArrayBuffer) || weights.byteLength !== manifest.bytes) throw new RangeError(`the weights of ${manifest.name} are not ${manifest.bytes} bytes: the file is truncated or damaged`);
  if (sha256Hex(weights) !== manifest.sha256) throw new RangeError(`the weights of ${manifest.name} do not match the manifest's sha256: the file is damaged`);
  const config = { n_vocab: c.n_vocab, d_model: c.d_model, n_heads: c.n_heads, n_layers: c.n_layers, d_ff: c.d_ff,
    max_len: c.max_len, positions: c.positions };
  // train.mjs's name -> the runtime's (toRuntime's pairs, read backwards)
  const outer = { "tok.E": "tok_emb", "pos.E": "pos_emb", "ln_f.gamma": "norm_f.weight", "ln_f.beta": "norm_f.bias",
    "head.W": "head.weight", "head.b": "head.bias" };
  const inner = { "ln1.gamma": "norm1.weight", "ln1.beta": "norm1.bias", "attn.W_Q": "attn.wq", "attn.b_Q": "attn.bq",
    "attn.W_K": "attn.wk", "attn.b_K": "attn.bk", "attn.W_V": "attn.wv", "attn.b_V": "attn.bv", "attn.W_O": "attn.wo",
    "attn.b_O": "attn.bo", "ln2.gamma": "norm2.weight", "ln2.beta": "norm2.bias", "ffn.fc1.W": "ffn.w1", "ffn.fc1.b": "ffn.b1",
    "ffn.fc2.W": "ffn.w2", "ffn.fc2.b": "ffn.b2" };
  const tensors = readTensors(manifest, weights); // float16 or float32, checked, as float32
  const params = {};
  for (const [name, shape] of Object.entries(paramShapes(checkConfig(config)))) {
    const m = /^blocks\.(\d+)\.(.*)$/.exec(name);
    const key = m ? `layers.${m[1]}.${inner[m[2]]}` : outer[name];
    if (!tensors[key] || String(tensors[key].shape) !== String(shape)) throw new RangeError(`tensor ${key} of ${manifest.name} is missing or not [${shape}]`);
    params[name] = tensors[key].data;
  }
  if (manifest.tokenizer?.type !== "chars") throw new RangeError(`the model ${manifest.name} has no character tokenizer`);
  return { config, params, chars: Array.from(manifest.tokenizer.chars) };
}

/**
 * Text as character ids: {chars (sorted, as the library's sorted(set(text))), ids}.
 * Characters are Unicode code points (a character outside the Basic Multilingual Plane
 * is one character, not two UTF-16 halves).
 */
export function charVocabulary(text) {
  const points = Array.from(text);
  // sorted by code point, as Python sorts str
  const chars = [...new Set(points)].sort((a, b) => a.codePointAt(0) - b.codePointAt(0));
  const lookup = new Map(chars.map((ch, i) => [ch, i]));
  const ids = Int32Array.from(points, (ch) => lookup.get(ch));
  return { chars, ids };
}

/** B windows of T + 1 ids at random offsets of `ids`: inputs and next-token targets. */
export function randomWindows(rng, ids, B, T) {
  if (ids.length < T + 2) throw new RangeError(`the text must hold at least ${T + 2} characters, got ${ids.length}`);
  const x = new Int32Array(B * T);
  const y = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    const start = Math.floor(rng() * (ids.length - T - 1));
    for (let t = 0; t < T; t++) {
      x[b * T + t] = ids[start + t];
      y[b * T + t] = ids[start + t + 1];
    }
  }
  return { x, y };
}

/**
 * Mean loss on `ids` in consecutive windows of T (the library's validation_loss), at
 * most `maxWindows` of them, B at a time.
 */
export function heldOutLoss(model, ids, T, { B = 16, maxWindows = Infinity } = {}) {
  const n = Math.min(Math.floor((ids.length - 1) / T), maxWindows);
  if (n < 1) throw new RangeError(`the held-out text must hold at least ${T + 1} characters, got ${ids.length}`);
  let total = 0;
  for (let w0 = 0; w0 < n; w0 += B) {
    const b = Math.min(B, n - w0);
    const x = new Int32Array(b * T), y = new Int32Array(b * T);
    for (let i = 0; i < b; i++) {
      for (let t = 0; t < T; t++) {
        x[i * T + t] = ids[(w0 + i) * T + t];
        y[i * T + t] = ids[(w0 + i) * T + t + 1];
      }
    }
    total += model.loss(x, y, b, T) * b;
  }
  return total / n;
}
