// train-optim.mjs: Adam(W), gradient clipping and the learning-rate schedule, the
// JavaScript twins of attention_lib.nn.Adam, attention_lib.nn.clip_grad_norm and
// attention_lib.train.shakespeare.learning_rate. No dependencies.
//
// Parameters and gradients are {name: typed array}; the optimiser keeps the two running
// means of each parameter in arrays of the same type.

/** A finite number >= low (and < high when given), or a RangeError naming it. */
export function checkHyper(value, name, low, high = null) {
  if (typeof value !== "number" || !Number.isFinite(value) || value < low || (high !== null && value >= high)) {
    const range = high === null ? `a finite number >= ${low}` : `a number in [${low}, ${high})`;
    throw new RangeError(`${name} must be ${range}, got ${value}`);
  }
  return value;
}

/**
 * Adam (Kingma and Ba, 2015) with decoupled weight decay (AdamW, Loshchilov and Hutter,
 * 2019), as torch.optim.AdamW: at step t, for each parameter theta with gradient g,
 *   theta *= 1 - lr weightDecay
 *   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
 *   theta -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 * With weightDecay = 0 (the default) it is the library's Adam.
 */
export class AdamW {
  constructor(params, { lr = 1e-3, betas = [0.9, 0.999], eps = 1e-8, weightDecay = 0 } = {}) {
    this.lr = checkHyper(lr, "lr", 0);
    this.beta1 = checkHyper(betas[0], "betas[0]", 0, 1);
    this.beta2 = checkHyper(betas[1], "betas[1]", 0, 1);
    this.eps = checkHyper(eps, "eps", 0);
    this.weightDecay = checkHyper(weightDecay, "weightDecay", 0);
    this.params = params;
    this.t = 0;
    this.m = {};
    this.v = {};
    for (const [name, p] of Object.entries(params)) {
      this.m[name] = new p.constructor(p.length);
      this.v[name] = new p.constructor(p.length);
    }
  }

  /** Move every parameter once from `grads` (same names and sizes as the parameters). */
  step(grads) {
    for (const [name, p] of Object.entries(this.params)) {
      const g = grads[name];
      if (!g || g.length !== p.length) throw new RangeError(`AdamW.step: the gradient of ${name} is missing or of another size`);
    }
    checkHyper(this.lr, "lr", 0);
    this.t += 1;
    const { beta1: b1, beta2: b2, eps, lr } = this;
    const c1 = 1 - b1 ** this.t;
    const c2 = 1 - b2 ** this.t;
    const decay = 1 - lr * this.weightDecay;
    for (const [name, p] of Object.entries(this.params)) {
      const g = grads[name], m = this.m[name], v = this.v[name];
      for (let i = 0; i < p.length; i++) {
        const gi = g[i];
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        p[i] = p[i] * decay - (lr * (m[i] / c1)) / (Math.sqrt(v[i] / c2) + eps);
      }
    }
  }
}

/**
 * Scale every gradient so that their joint norm is at most maxNorm (torch's
 * clip_grad_norm_): multiplied by maxNorm / (norm + 1e-6) when that is below 1. Returns
 * the norm before clipping. A norm that is NaN or infinite leaves the gradients as they
 * are and is returned, for the caller to refuse the step.
 */
export function clipGradNorm(grads, maxNorm) {
  checkHyper(maxNorm, "maxNorm", Number.MIN_VALUE);
  let sq = 0;
  for (const g of Object.values(grads)) for (let i = 0; i < g.length; i++) sq += g[i] * g[i];
  const norm = Math.sqrt(sq);
  if (!Number.isFinite(norm)) return norm;
  const scale = maxNorm / (norm + 1e-6);
  if (scale < 1) for (const g of Object.values(grads)) for (let i = 0; i < g.length; i++) g[i] *= scale;
  return norm;
}

/**
 * Linear warm-up to lr over `warmup` steps, then a cosine decay to minLr at the last step
 * (steps), as the library's learning_rate(step, cfg). step counts from 1.
 */
export function learningRate(step, { lr, minLr = lr, warmup = 0, steps }) {
  if (warmup > 0 && step <= warmup) return (lr * step) / warmup;
  const frac = (step - warmup) / Math.max(1, steps - warmup);
  return minLr + 0.5 * (lr - minLr) * (1 + Math.cos(Math.PI * Math.min(frac, 1)));
}
