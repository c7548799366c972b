// train-simd.mjs: causal multi-head attention's forward and backward passes for training,
// on the WebAssembly SIMD kernels (simd.mjs): the same arithmetic as train-layers.mjs's
// attentionForward and attentionBackward (the reference, and the fallback), arranged as
// matrix products so that kernels.wat's dot_rows does the sums, f32x4 over the inner
// dimension.
//
// For each sequence b and head h, the head's rows are gathered into the kernels' memory
// (Qh, Kh: T x hd; transposed copies where a product needs the other operand's rows), and
//   forward:  S = Qh Kh^T (T x T), P = softmax(scale S) under the causal mask (kernels.wat's
//             softmax_rows: e^x by a float32 polynomial), ctx = P Vh;
//   backward: dP = dCtx Vh^T, dS = scale P (dP - rowsum(dP P)), dV = P^T dCtx,
//             dQ = dS Kh, dK = dS^T Qh (the products with a transposed left side by
//             kernels.wat's dot_cols, which sums down the rows: no transposes).
// The products run over the whole T x T square: the masked half of P and dS is zero,
// which adds nothing (twice the arithmetic of the triangle, in four lanes at once).

import { transpose } from "./train-layers.mjs";

/** Copy head h of sequence b (T rows of hd at column h hd of rows of d) out of X into Y. */
function gather(X, b, h, T, d, hd, Y) {
  for (let t = 0; t < T; t++) {
    const src = (b * T + t) * d + h * hd;
    for (let e = 0; e < hd; e++) Y[t * hd + e] = X[src + e];
  }
}

/** The inverse of gather: Y's T rows of hd into head h of sequence b of X. */
function scatter(Y, b, h, T, d, hd, X) {
  for (let t = 0; t < T; t++) {
    const dst = (b * T + t) * d + h * hd;
    for (let e = 0; e < hd; e++) X[dst + e] = Y[t * hd + e];
  }
}

/** attentionForward (train-layers.mjs) on the kernels: ctx written, P (B, H, T, T) kept. */
export function attentionForwardSimd(kernels, q, k, v, B, T, H, hd, ctx, P) {
  const d = H * hd;
  const scale = 1 / Math.sqrt(hd);
  const dot = kernels.exports.dot_rows;
  const [Qh, Kh, Vh, VhT, S, Ch] = kernels.scratch([T * hd, T * hd, T * hd, hd * T, T * T, T * hd]);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      gather(q, b, h, T, d, hd, Qh.view);
      gather(k, b, h, T, d, hd, Kh.view);
      gather(v, b, h, T, d, hd, Vh.view);
      transpose(Vh.view, T, hd, VhT.view);
      S.view.fill(0);
      dot(Qh.at, T, Kh.at, T, hd, S.at); // S[t, s] = q_t . k_s
      const pBase = (b * H + h) * T * T;
      // scale, and mask the future with -infinity (weight 0); then softmax_rows (kernels.wat)
      const Sv = kernels.f32, s0 = S.at >> 2;
      for (let t = 0; t < T; t++) {
        const r = s0 + t * T;
        for (let s = 0; s <= t; s++) Sv[r + s] *= scale;
        for (let s = t + 1; s < T; s++) Sv[r + s] = -Infinity;
      }
      kernels.exports.softmax_rows(S.at, T, T);
      P.set(Sv.subarray(s0, s0 + T * T), pBase);
      Ch.view.fill(0);
      dot(S.at, T, VhT.at, hd, T, Ch.at); // ctx_t = sum_s P[t, s] v_s
      scatter(Ch.view, b, h, T, d, hd, ctx);
    }
  }
  return ctx;
}

/** attentionBackward (train-layers.mjs) on the kernels: dq, dk, dv written. */
export function attentionBackwardSimd(kernels, dCtx, q, k, v, P, B, T, H, hd, dq, dk, dv) {
  const d = H * hd;
  const scale = 1 / Math.sqrt(hd);
  const dot = kernels.exports.dot_rows;
  const cols = kernels.exports.dot_cols; // C += A^T B: the products with a transposed left side
  const [G, Vh, Qh, KT, Pw, dP, out] = kernels.scratch([T * hd, T * hd, T * hd, hd * T, T * T, T * T, T * hd]);
  const tmp = new Float32Array(T * hd);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const pBase = (b * H + h) * T * T;
      gather(dCtx, b, h, T, d, hd, G.view);
      gather(v, b, h, T, d, hd, Vh.view);
      Pw.view.set(P.subarray(pBase, pBase + T * T));
      dP.view.fill(0);
      dot(G.at, T, Vh.at, T, hd, dP.at); // dP[t, s] = dCtx_t . v_s
      // dS = scale P (dP - sum_s dP P), stored in dP (rows t)
      const Pv = Pw.view, dPv = dP.view;
      for (let t = 0; t < T; t++) {
        const r = t * T;
        let inner = 0;
        for (let s = 0; s <= t; s++) inner += dPv[r + s] * Pv[r + s];
        for (let s = 0; s < T; s++) dPv[r + s] = s <= t ? Pv[r + s] * (dPv[r + s] - inner) * scale : 0;
      }
      // dV = P^T dCtx (dot_cols: summed down the rows t of P and dCtx)
      out.view.fill(0);
      cols(Pw.at, T, T, G.at, hd, out.at);
      scatter(out.view, b, h, T, d, hd, dv);
      // dQ = dS K: rows of dS against rows of K^T
      gather(k, b, h, T, d, hd, tmp);
      transpose(tmp, T, hd, KT.view);
      out.view.fill(0);
      dot(dP.at, T, KT.at, hd, T, out.at);
      scatter(out.view, b, h, T, d, hd, dq);
      // dK = dS^T Q (dot_cols)
      gather(q, b, h, T, d, hd, Qh.view);
      out.view.fill(0);
      cols(dP.at, T, T, Qh.at, hd, out.at);
      scatter(out.view, b, h, T, d, hd, dk);
    }
  }
}
