// train-lora.mjs: LoRA (Hu et al., 2021) for train.mjs's TinyGPT, the JavaScript twin of
// attention_lib.nn.lora.apply (read its module's notes: the same parametrisation).
//
// A weight W0 (n_in, n_out) of the model stays frozen; it is finetuned as
//   W = W0 + scaling A B,   A (n_in, r), B (r, n_out), scaling = alpha / r,
// and only A and B learn. A is drawn as the library (and PEFT) draw it, uniform in
// [-1/sqrt(n_in), 1/sqrt(n_in)]; B starts at zero, so the adapted model starts as the base
// model exactly. Before each forward pass install() writes W into the model's params; after
// the model's backward has computed dW for an adapted weight, gradsFrom() maps it through the
// chain rule:
//   dA = scaling dW B^T,   dB = scaling A^T dW.
// Every other weight is frozen (model.frozen): its backward computes only the input's
// gradient, so a LoRA step costs less than a full one. trainStep (train.mjs) does the rest:
// clip the adapters' gradients, AdamW on the adapters alone.
//
//   const lora = new LoRA(model, {rank: 8, alpha: 16, targets: ["q", "v"], seed: 0});
//   const opt = new AdamW(lora.params, {lr});
//   trainStep(model, opt, tokens, targets, B, T, {clip, lr});

import { makeRng } from "./transformer.mjs";

/** The projections LoRA can adapt, as the library's lora.targets_of names them. */
export const TARGETS = { q: "attn.W_Q", k: "attn.W_K", v: "attn.W_V", o: "attn.W_O", fc1: "ffn.fc1.W", fc2: "ffn.fc2.W" };

/** The adapters' parameter count for a model config, rank and targets (none allocated). */
export function loraParams(config, rank, targets = ["q", "v"]) {
  const { d_model: d, d_ff: f } = config;
  const sides = { q: [d, d], k: [d, d], v: [d, d], o: [d, d], fc1: [d, f], fc2: [f, d] };
  return config.n_layers * targets.reduce((a, t) => a + rank * (sides[t][0] + sides[t][1]), 0);
}

export class LoRA {
  /**
   * Attach adapters to `targets` (from q, k, v, o, fc1, fc2) of every block of `model`.
   * rank: an integer in [1, the smaller side of every adapted weight]; alpha: positive
   * (scaling = alpha / rank); seed draws A; init: {"<weight>.lora_A": values} to start A
   * from instead (the parity fixture). Every check runs before the model changes.
   */
  constructor(model, { rank = 8, alpha = 16, targets = ["q", "v"], seed = 0, init = null } = {}) {
    if (!model || !model.shapes || !model.params) throw new TypeError("LoRA adapts a TinyGPT of train.mjs");
    if (model.lora) throw new Error("this model has LoRA adapters already: adapt it once");
    if (!Array.isArray(targets) || !targets.length) throw new RangeError(`targets must name at least one of ${Object.keys(TARGETS).join(", ")}`);
    for (const t of targets) {
      if (!(t in TARGETS)) throw new RangeError(`unknown target ${JSON.stringify(t)}: the model has ${Object.keys(TARGETS).join(", ")}`);
    }
    if (new Set(targets).size !== targets.length) throw new RangeError(`targets names a projection twice: ${targets.join(", ")}`);
    const names = [];
    for (let l = 0; l < model.config.n_layers; l++) for (const t of targets) names.push(`blocks.${l}.${TARGETS[t]}`);
    names.sort((a, b) => Number(a.split(".")[1]) - Number(b.split(".")[1]) || (a < b ? -1 : a > b ? 1 : 0));
    const smallest = Math.min(...names.map((n) => Math.min(...model.shapes[n])));
    if (!(Number.isInteger(rank) && rank >= 1 && rank <= smallest)) {
      throw new RangeError(`rank must be an integer in [1, ${smallest}], the smaller side of the adapted weights, got ${rank}`);
    }
    if (!(typeof alpha === "number" && Number.isFinite(alpha) && alpha > 0)) throw new RangeError(`alpha must be a positive finite number, got ${alpha}`);
    if (init) {
      for (const n of names) {
        const a = init[`${n}.lora_A`];
        if (!a || a.length !== model.shapes[n][0] * rank) throw new RangeError(`init.${n}.lora_A must hold ${model.shapes[n][0] * rank} numbers`);
      }
    }
    this.model = model;
    this.rank = rank;
    this.alpha = alpha;
    this.scaling = alpha / rank;
    this.targets = [...targets];
    this.adapters = [];
    this.params = {};
    this.grads = {};
    const rng = makeRng(seed);
    const A = model.Array;
    for (const name of names) {
      const [nIn, nOut] = model.shapes[name];
      const a = new A(nIn * rank);
      if (init) a.set(init[`${name}.lora_A`]);
      else {
        const bound = 1 / Math.sqrt(nIn);
        for (let i = 0; i < a.length; i++) a[i] = bound * (2 * rng() - 1);
      }
      const b = new A(rank * nOut);
      this.params[`${name}.lora_A`] = a;
      this.params[`${name}.lora_B`] = b;
      this.grads[`${name}.lora_A`] = new A(a.length);
      this.grads[`${name}.lora_B`] = new A(b.length);
      this.adapters.push({ name, nIn, nOut, base: A.from(model.params[name]), A: a, B: b });
    }
    // every weight but the adapted ones gets no gradient (their own dW is what LoRA maps)
    model.frozen = new Set(Object.keys(model.shapes).filter((n) => !names.includes(n)));
    model.lora = this;
  }

  /** How many numbers learn: r (n_in + n_out) per adapted weight. */
  get count() {
    return Object.values(this.params).reduce((a, p) => a + p.length, 0);
  }

  /** Write W = W0 + scaling A B into the model's params, for every adapted weight. */
  install() {
    const r = this.rank, s = this.scaling;
    for (const { name, nIn, nOut, base, A, B } of this.adapters) {
      const W = this.model.params[name];
      for (let i = 0; i < nIn; i++) {
        for (let j = 0; j < nOut; j++) {
          let acc = 0;
          for (let k = 0; k < r; k++) acc += A[i * r + k] * B[k * nOut + j];
          W[i * nOut + j] = base[i * nOut + j] + Math.fround(s * Math.fround(acc));
        }
      }
    }
  }

  /** The adapters' gradients from the model's (after its backward): dA = s dW B^T, dB = s A^T dW. */
  gradsFrom(grads) {
    const r = this.rank, s = this.scaling;
    for (const { name, nIn, nOut, A, B } of this.adapters) {
      const dW = grads[name], dA = this.grads[`${name}.lora_A`], dB = this.grads[`${name}.lora_B`];
      for (let i = 0; i < nIn; i++) {
        for (let k = 0; k < r; k++) {
          let acc = 0;
          for (let j = 0; j < nOut; j++) acc += dW[i * nOut + j] * B[k * nOut + j];
          dA[i * r + k] = s * acc;
        }
      }
      dB.fill(0);
      for (let i = 0; i < nIn; i++) {
        for (let k = 0; k < r; k++) {
          const a = s * A[i * r + k];
          for (let j = 0; j < nOut; j++) dB[k * nOut + j] += a * dW[i * nOut + j];
        }
      }
    }
  }
}
