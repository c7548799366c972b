// train-layers.mjs: the forward and backward passes of a decoder-only Transformer's
// layers, for training in the reader's browser (or in node). No dependencies.
//
// Read it after chapters 8 and 9: every function is the JavaScript twin of a layer of
// attention_lib.nn, with the same formulas (each comment names the library's class).
// Activations are flat row-major arrays of n rows (n = batch x positions); weights are
// (n_in, n_out), the library's `x @ W` convention. The arrays are Float32Array (the
// library's float32 training) or Float64Array (for the gradient checks); arithmetic
// inside a dot product is in double, as JavaScript always computes.
// Float32 products run in WebAssembly SIMD where the engine has it (simd.mjs, kernels.wat;
// sums in float32 there): the loops below are the fallback and the reference.

import { sharedKernels } from "./simd.mjs";
import { attentionBackwardSimd, attentionForwardSimd } from "./train-simd.mjs";

// ---------------------------------------------------------------------------
// Matrix products: one cache-blocked kernel, C[i, j] = A_i . B_j
// ---------------------------------------------------------------------------

const BLOCK = 32; // rows of B kept hot in the cache while every row of A passes by

/**
 * C (nA, nB) = A (nA, len) times B (nB, len) transposed: each entry a dot product of two
 * contiguous rows. Rows of B are taken BLOCK at a time and met by every row of A; inside,
 * a tile of 4 rows of A by 4 rows of B is summed at once (16 sums in registers: each
 * number loaded serves four products). With `accumulate`, C += instead of C =.
 */
export function dotRows(A, nA, B, nB, len, C, accumulate = false) {
  if (C instanceof Float32Array && A instanceof Float32Array && B instanceof Float32Array) {
    const kernels = sharedKernels(); // null: no SIMD, or forced off (simd.mjs's setScalar)
    if (kernels) return kernels.dotRows(A, nA, B, nB, len, C, accumulate);
  }
  if (!accumulate) C.fill(0, 0, nA * nB); // then every entry is added to
  for (let j0 = 0; j0 < nB; j0 += BLOCK) {
    const j1 = Math.min(j0 + BLOCK, nB);
    let i = 0;
    for (; i + 4 <= nA; i += 4) {
      const a0 = i * len, a1 = a0 + len, a2 = a1 + len, a3 = a2 + len;
      const c0 = i * nB, c1 = c0 + nB, c2 = c1 + nB, c3 = c2 + nB;
      let j = j0;
      for (; j + 4 <= j1; j += 4) {
        const b0 = j * len, b1 = b0 + len, b2 = b1 + len, b3 = b2 + len;
        let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
        let s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
        for (let t = 0; t < len; t++) {
          const x0 = A[a0 + t], x1 = A[a1 + t], x2 = A[a2 + t], x3 = A[a3 + t];
          const w0 = B[b0 + t], w1 = B[b1 + t], w2 = B[b2 + t], w3 = B[b3 + t];
          s00 += x0 * w0; s01 += x0 * w1; s02 += x0 * w2; s03 += x0 * w3;
          s10 += x1 * w0; s11 += x1 * w1; s12 += x1 * w2; s13 += x1 * w3;
          s20 += x2 * w0; s21 += x2 * w1; s22 += x2 * w2; s23 += x2 * w3;
          s30 += x3 * w0; s31 += x3 * w1; s32 += x3 * w2; s33 += x3 * w3;
        }
        C[c0 + j] += s00; C[c0 + j + 1] += s01;
        C[c0 + j + 2] += s02; C[c0 + j + 3] += s03;
        C[c1 + j] += s10; C[c1 + j + 1] += s11;
        C[c1 + j + 2] += s12; C[c1 + j + 3] += s13;
        C[c2 + j] += s20; C[c2 + j + 1] += s21;
        C[c2 + j + 2] += s22; C[c2 + j + 3] += s23;
        C[c3 + j] += s30; C[c3 + j + 1] += s31;
        C[c3 + j + 2] += s32; C[c3 + j + 3] += s33;
      }
      for (; j < j1; j++) {
        const b = j * len;
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let t = 0; t < len; t++) {
          const w = B[b + t];
          s0 += A[a0 + t] * w; s1 += A[a1 + t] * w; s2 += A[a2 + t] * w; s3 += A[a3 + t] * w;
        }
        C[c0 + j] += s0; C[c1 + j] += s1;
        C[c2 + j] += s2; C[c3 + j] += s3;
      }
    }
    for (; i < nA; i++) {
      const a = i * len;
      for (let j = j0; j < j1; j++) {
        const b = j * len;
        let s = 0;
        for (let t = 0; t < len; t++) s += A[a + t] * B[b + t];
        C[i * nB + j] += s;
      }
    }
  }
  return C;
}

/** The transpose of X (rows, cols) into out (cols, rows). */
export function transpose(X, rows, cols, out = new X.constructor(rows * cols)) {
  for (let i = 0; i < rows; i++) {
    const r = i * cols;
    for (let j = 0; j < cols; j++) out[j * rows + i] = X[r + j];
  }
  return out;
}

// ---------------------------------------------------------------------------
// Linear: y = x W + b (attention_lib.nn.Linear)
// ---------------------------------------------------------------------------

/**
 * y (n, nOut) = x (n, nIn) W (nIn, nOut) + b. WT is W transposed (nOut, nIn), kept by
 * the caller and refreshed after each optimiser step, so that every output is a dot
 * product of two contiguous rows.
 */
export function linearForward(x, n, nIn, WT, b, nOut, y) {
  dotRows(x, n, WT, nOut, nIn, y);
  if (b) for (let i = 0; i < n; i++) for (let j = 0; j < nOut; j++) y[i * nOut + j] += b[j];
  return y;
}

/**
 * The backward of y = x W + b, with g = d loss / d y (n, nOut):
 * dW = x^T g (summed over the rows), db = the sum of g's rows, dx = g W^T.
 * dW and db are accumulated into (+=); dx is returned (or written into `dx`). dW null: a
 * frozen weight and bias: only dx is computed, half of the backward's products.
 * `scratch` holds two transposes: {xT: n nIn, gT: n nOut} (allocated when absent).
 */
export function linearBackward(x, n, nIn, W, g, nOut, dW, db, dx = null, scratch = {}) {
  if (dW === null) { // a frozen weight (LoRA's base, train-lora.mjs): the input's gradient only
    if (dx) dotRows(g, n, W, nIn, nOut, dx);
    return dx;
  }
  const kernels = x instanceof Float32Array && g instanceof Float32Array && dW instanceof Float32Array ? sharedKernels() : null;
  if (kernels) {
    kernels.dotCols(x, n, nIn, g, nOut, dW); // dW += x^T g, summed down the rows
    if (db) {
      for (let i = 0; i < n; i++) for (let j = 0; j < nOut; j++) db[j] += g[i * nOut + j];
    }
    if (dx) kernels.dotRows(g, n, W, nIn, nOut, dx);
    return dx;
  }
  const xT = transpose(x, n, nIn, scratch.xT);
  const gT = transpose(g, n, nOut, scratch.gT);
  dotRows(xT, nIn, gT, nOut, n, dW, true); // dW[p, j] = sum_i x[i, p] g[i, j]
  if (db) {
    for (let j = 0; j < nOut; j++) {
      let s = 0;
      for (let i = 0; i < n; i++) s += gT[j * n + i];
      db[j] += s;
    }
  }
  if (dx) dotRows(g, n, W, nIn, nOut, dx); // dx[i, p] = g_i . W_p
  return dx;
}

// ---------------------------------------------------------------------------
// Embedding (attention_lib.nn.Embedding): a lookup, whose gradient adds rows back
// ---------------------------------------------------------------------------

/** x[i] = E[tokens[i]] (+ P[i mod T] for learned positions, P the position table). */
export function embeddingForward(E, tokens, d, x, P = null, T = 0) {
  for (let i = 0; i < tokens.length; i++) {
    const e = tokens[i] * d;
    const r = i * d;
    for (let k = 0; k < d; k++) x[r + k] = E[e + k];
    if (P) {
      const p = (i % T) * d;
      for (let k = 0; k < d; k++) x[r + k] += P[p + k];
    }
  }
  return x;
}

/**
 * dE[tokens[i]] += g[i]: a token used twice receives both rows (np.add.at). For the
 * positions, dP[t] += g[i] for every row at position t (the batch summed).
 */
export function embeddingBackward(g, tokens, d, dE, dP = null, T = 0) {
  for (let i = 0; i < tokens.length; i++) {
    const e = tokens[i] * d;
    const r = i * d;
    for (let k = 0; k < d; k++) dE[e + k] += g[r + k];
    if (dP) {
      const p = (i % T) * d;
      for (let k = 0; k < d; k++) dP[p + k] += g[r + k];
    }
  }
}

// ---------------------------------------------------------------------------
// LayerNorm (attention_lib.nn.LayerNorm)
// ---------------------------------------------------------------------------

/**
 * y = gamma (x - mean) / sqrt(var + eps) + beta over each row of d. Keeps, for the
 * backward pass, xHat (n, d) and inv = 1 / sigma (n).
 */
export function layerNormForward(x, n, d, gamma, beta, eps, y, xHat, inv) {
  for (let i = 0; i < n; i++) {
    const r = i * d;
    let mean = 0;
    for (let k = 0; k < d; k++) mean += x[r + k];
    mean /= d;
    let sq = 0;
    for (let k = 0; k < d; k++) {
      const c = x[r + k] - mean;
      sq += c * c;
    }
    const s = 1 / Math.sqrt(sq / d + eps);
    inv[i] = s;
    for (let k = 0; k < d; k++) {
      const h = (x[r + k] - mean) * s;
      xHat[r + k] = h;
      y[r + k] = h * gamma[k] + beta[k];
    }
  }
  return y;
}

/**
 * With h = g gamma: dx = (h - mean(h) - xHat mean(h xHat)) / sigma, the two subtractions
 * removing what the normalisation throws away (a shift and a scale of the row);
 * dgamma += sum of g xHat, dbeta += sum of g over the rows.
 */
export function layerNormBackward(g, n, d, gamma, xHat, inv, dGamma, dBeta, dx) {
  for (let i = 0; i < n; i++) {
    const r = i * d;
    let meanH = 0, meanHX = 0;
    for (let k = 0; k < d; k++) {
      const gk = g[r + k];
      dGamma[k] += gk * xHat[r + k];
      dBeta[k] += gk;
      const h = gk * gamma[k];
      meanH += h;
      meanHX += h * xHat[r + k];
    }
    meanH /= d;
    meanHX /= d;
    const s = inv[i];
    for (let k = 0; k < d; k++) {
      dx[r + k] = s * (g[r + k] * gamma[k] - meanH - xHat[r + k] * meanHX);
    }
  }
  return dx;
}

// ---------------------------------------------------------------------------
// GELU, exact (attention_lib.nn.GELU, approximate="none")
// ---------------------------------------------------------------------------

const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

/**
 * erf(x) to double precision: erf(x) = 2/sqrt(pi) e^(-x^2) sum_n 2^n x^(2n+1) / (2n+1)!!,
 * a series of positive terms (no cancellation); past |x| = 6, erf is +-1 in double.
 * (transformer.mjs's 1.5e-7 approximation is enough to run a model; the gradient checks
 * in float64 need the exact function whose derivative the backward pass uses.)
 */
export function erf(x) {
  const ax = Math.abs(x);
  if (ax >= 6) return Math.sign(x);
  const x2 = ax * ax;
  let term = ax, sum = ax;
  for (let n = 1; n < 200; n++) {
    term *= (2 * x2) / (2 * n + 1);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  const r = TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
  return x < 0 ? -r : r;
}

/**
 * erf(x) to within 1.5e-7 (Abramowitz and Stegun 7.1.26, as transformer.mjs runs models):
 * far below float32's rounding, and several times faster than the series. Float32
 * training uses it; float64 (the gradient checks) uses erf().
 */
export function erfFast(x) {
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return x < 0 ? -y : y;
}

/**
 * y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2. With `cdf` and `pdf` (arrays like x),
 * keeps Phi(x) and the normal density phi(x) for the backward pass, which then costs
 * no exponential. Float32 arrays use erfFast, whose exponential is phi's own.
 */
export function geluForward(x, y, cdf = null, pdf = null) {
  const fast = !(x instanceof Float64Array);
  if (fast && cdf && x.length % 4 === 0 && x instanceof Float32Array) {
    const kernels = sharedKernels(); // the same formulas in float32, four at a time
    if (kernels) {
      kernels.gelu(x, y, cdf, pdf, x.length);
      return y;
    }
  }
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    const e = Math.exp(-0.5 * v * v); // = exp(-z^2), z = v / sqrt 2
    let phi;
    if (fast) {
      // r / 2 = (1 - erf(|v| / sqrt 2)) / 2, and Phi(v) = r / 2 below 0 (no cancellation)
      const t = 1 / (1 + 0.3275911 * Math.abs(v) * Math.SQRT1_2);
      const half = 0.5 * ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * e;
      phi = v < 0 ? half : 1 - half;
    } else {
      phi = 0.5 * (1 + erf(v * Math.SQRT1_2));
    }
    y[i] = v * phi;
    if (cdf) {
      cdf[i] = phi;
      pdf[i] = INV_SQRT_2PI * e;
    }
  }
  return y;
}

/** dx = g (Phi(x) + x phi(x)), phi the normal density (from forward's cdf and pdf if given). */
export function geluBackward(x, g, dx, cdf = null, pdf = null) {
  if (cdf) {
    for (let i = 0; i < x.length; i++) dx[i] = g[i] * (cdf[i] + x[i] * pdf[i]);
    return dx;
  }
  const e = x instanceof Float64Array ? erf : erfFast;
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    const c = 0.5 * (1 + e(v * Math.SQRT1_2));
    dx[i] = g[i] * (c + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v));
  }
  return dx;
}

// ---------------------------------------------------------------------------
// Rotary positions (attention_lib.rotary, interleaved pairs (2i, 2i+1))
// ---------------------------------------------------------------------------

/** cos and sin (T, hd/2) of the angles t base^(-2i/hd). */
export function rotaryTables(T, hd, base = 10000) {
  const half = hd / 2;
  const cos = new Float64Array(T * half);
  const sin = new Float64Array(T * half);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < half; i++) {
      const angle = t * base ** (-(2 * i) / hd);
      cos[t * half + i] = Math.cos(angle);
      sin[t * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/**
 * Rotate, in place, each head's feature pairs of the rows of X (n rows of `width`, row i
 * at position i mod T) by their angles; `inverse` rotates back, which is the gradient of
 * the rotation (a rotation's transpose is its inverse).
 */
export function rotate(X, n, width, T, hd, tables, inverse = false) {
  const half = hd / 2;
  const sign = inverse ? -1 : 1;
  for (let i = 0; i < n; i++) {
    const t = (i % T) * half;
    for (let h0 = i * width; h0 < (i + 1) * width; h0 += hd) {
      for (let p = 0; p < half; p++) {
        const c = tables.cos[t + p], s = sign * tables.sin[t + p];
        const a = X[h0 + 2 * p], b = X[h0 + 2 * p + 1];
        X[h0 + 2 * p] = a * c - b * s;
        X[h0 + 2 * p + 1] = a * s + b * c;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Causal multi-head attention (attention_lib.nn.SelfAttention's core)
// ---------------------------------------------------------------------------

/**
 * For each sequence b and head h: P = softmax(q k^T / sqrt(hd)) under the causal mask,
 * ctx = P v. q, k, v, ctx are (B T, d) with head h in columns h hd .. (h + 1) hd;
 * P is kept, (B, H, T, T) with zeros above the diagonal, for the backward pass and for
 * the widgets' attention maps.
 */
export function attentionForward(q, k, v, B, T, H, hd, ctx, P) {
  const kernels = q instanceof Float32Array && ctx instanceof Float32Array ? sharedKernels() : null;
  if (kernels) return attentionForwardSimd(kernels, q, k, v, B, T, H, hd, ctx, P);
  const d = H * hd;
  const scale = 1 / Math.sqrt(hd);
  ctx.fill(0);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const pBase = (b * H + h) * T * T;
      for (let t = 0; t < T; t++) {
        const qi = (b * T + t) * d + h * hd;
        const pRow = pBase + t * T;
        let max = -Infinity;
        for (let s = 0; s <= t; s++) {
          const ki = (b * T + s) * d + h * hd;
          let dot = 0;
          for (let e = 0; e < hd; e++) dot += q[qi + e] * k[ki + e];
          dot *= scale;
          P[pRow + s] = dot;
          if (dot > max) max = dot;
        }
        let sum = 0;
        for (let s = 0; s <= t; s++) {
          const w = Math.exp(P[pRow + s] - max);
          P[pRow + s] = w;
          sum += w;
        }
        for (let s = 0; s <= t; s++) P[pRow + s] /= sum;
        for (let s = t + 1; s < T; s++) P[pRow + s] = 0;
        for (let s = 0; s <= t; s++) {
          const w = P[pRow + s];
          const vi = (b * T + s) * d + h * hd;
          for (let e = 0; e < hd; e++) ctx[qi + e] += w * v[vi + e];
        }
      }
    }
  }
  return ctx;
}

/**
 * The backward of attention, from dCtx (B T, d):
 * dV = P^T dCtx, dP = dCtx V^T, dS = P (dP - rowsum(dP P)), dQ = scale dS K,
 * dK = scale dS^T Q (attention_lib._kernel.attention_backward). dq, dk, dv are written.
 * `dP` is a scratch row of T.
 */
export function attentionBackward(dCtx, q, k, v, P, B, T, H, hd, dq, dk, dv) {
  const kernels = q instanceof Float32Array && dq instanceof Float32Array ? sharedKernels() : null;
  if (kernels) return attentionBackwardSimd(kernels, dCtx, q, k, v, P, B, T, H, hd, dq, dk, dv);
  const d = H * hd;
  const scale = 1 / Math.sqrt(hd);
  dq.fill(0);
  dk.fill(0);
  dv.fill(0);
  const dP = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const pBase = (b * H + h) * T * T;
      for (let t = 0; t < T; t++) {
        const gi = (b * T + t) * d + h * hd;
        const pRow = pBase + t * T;
        let inner = 0;
        for (let s = 0; s <= t; s++) {
          const vi = (b * T + s) * d + h * hd;
          let dot = 0;
          for (let e = 0; e < hd; e++) dot += dCtx[gi + e] * v[vi + e];
          dP[s] = dot;
          inner += dot * P[pRow + s];
          const w = P[pRow + s];
          for (let e = 0; e < hd; e++) dv[vi + e] += w * dCtx[gi + e];
        }
        for (let s = 0; s <= t; s++) {
          const dS = P[pRow + s] * (dP[s] - inner) * scale;
          if (dS === 0) continue;
          const ki = (b * T + s) * d + h * hd;
          for (let e = 0; e < hd; e++) {
            dq[gi + e] += dS * k[ki + e];
            dk[ki + e] += dS * q[gi + e];
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Output: softmax cross-entropy (attention_lib.nn.softmax_cross_entropy)
// ---------------------------------------------------------------------------

/**
 * Mean of -log softmax(logits_i)[targets_i] over the rows whose target is >= 0 (a
 * target of -1 is not scored, as PyTorch's ignore_index), and d loss / d logits =
 * (softmax - onehot) / N on those rows, 0 on the others. Returns {loss, count}.
 */
export function crossEntropy(logits, targets, V, dLogits) {
  const n = targets.length;
  let count = 0;
  for (let i = 0; i < n; i++) if (targets[i] >= 0) count += 1;
  if (count === 0) throw new RangeError("crossEntropy: no row has a target: the mean loss of zero rows is undefined");
  let total = 0;
  for (let i = 0; i < n; i++) {
    const r = i * V;
    const target = targets[i];
    if (target < 0) {
      if (dLogits) dLogits.fill(0, r, r + V);
      continue;
    }
    let max = -Infinity;
    for (let j = 0; j < V; j++) if (logits[r + j] > max) max = logits[r + j];
    let sum = 0;
    for (let j = 0; j < V; j++) sum += Math.exp(logits[r + j] - max);
    const logSum = max + Math.log(sum);
    total += logSum - logits[r + target];
    if (dLogits) {
      for (let j = 0; j < V; j++) dLogits[r + j] = Math.exp(logits[r + j] - logSum) / count;
      dLogits[r + target] -= 1 / count;
    }
  }
  return { loss: total / count, count };
}
