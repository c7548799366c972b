// train-tasks.mjs: what the training widgets train on. No dependencies.
//
//   - chapter 9's copy task (make_batch in book/09_transformer.ipynb): sequences of L
//     random tokens in which a segment of 4 to L/2 tokens is immediately repeated; only
//     the predictable positions (inside the repeat, after its first token) are scored;
//   - how far the induction head has formed: layer 0's weight on the previous position,
//     layer 1's weight on the position after the earlier occurrence (the chapter's two
//     measures), and the held-out accuracy on the predictable positions;
//   - the presets of the "model of your own text" widget.

/** n distinct integers drawn from [0, V) (a partial Fisher-Yates shuffle). */
function distinct(rng, V, n) {
  const pool = Array.from({ length: V }, (_, i) => i);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(rng() * (V - i));
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  return pool.slice(0, n);
}

/**
 * n sequences of the copy task: {tokens (n L), targets (n L: the next token where it is
 * predictable, -1 elsewhere), segments: [start a, length m] per sequence}.
 */
export function copyBatch(rng, n, L = 24, V = 32) {
  if (V < L) throw new RangeError(`the copy task needs a vocabulary of at least L = ${L} tokens, got ${V}`);
  const tokens = new Int32Array(n * L);
  const targets = new Int32Array(n * L).fill(-1);
  const segments = [];
  for (let k = 0; k < n; k++) {
    const m = 4 + Math.floor(rng() * (Math.floor(L / 2) - 3)); // 4 .. L/2
    const a = Math.floor(rng() * (L - 2 * m + 1)); // 0 .. L - 2m
    const fresh = distinct(rng, V, L - m);
    const seq = [...fresh.slice(0, a + m), ...fresh.slice(a, a + m), ...fresh.slice(a + m)];
    tokens.set(seq, k * L);
    for (let i = a + m; i < a + 2 * m - 1; i++) targets[k * L + i] = seq[i + 1];
    segments.push([a, m]);
  }
  return { tokens, targets, segments };
}

/**
 * The chapter's two measures on a batch the model has just run forward on
 * (model.forward(batch.tokens, n, L)), with one head per layer: the mean weight of layer 0
 * on the previous position, and of layer 1, inside the repeat, on the position after the
 * earlier occurrence; and the accuracy of the greedy guess on the predictable positions.
 */
export function inductionScores(model, batch, n, L, logits) {
  const P0 = model.buffers.layers[0].P, P1 = model.buffers.layers[1].P;
  const H = model.config.n_heads;
  const V = model.config.n_vocab;
  let prev = 0, prevCount = 0, ind = 0, indCount = 0, right = 0, scored = 0;
  for (let k = 0; k < n; k++) {
    const base = k * H * L * L; // head 0
    for (let i = 1; i < L; i++) {
      prev += P0[base + i * L + i - 1];
      prevCount += 1;
    }
    const [a, m] = batch.segments[k];
    for (let i = a + m; i < a + 2 * m - 1; i++) {
      ind += P1[base + i * L + i - m + 1];
      indCount += 1;
    }
    for (let i = 0; i < L; i++) {
      const target = batch.targets[k * L + i];
      if (target < 0) continue;
      let best = 0;
      for (let j = 1; j < V; j++) if (logits[(k * L + i) * V + j] > logits[(k * L + i) * V + best]) best = j;
      right += best === target ? 1 : 0;
      scored += 1;
    }
  }
  return { previous: prev / prevCount, induction: ind / indCount, accuracy: right / scored };
}

/** Chapter 9's two-layer model and its training (the chapter's make_model and train). */
export const INDUCTION = {
  config: { n_vocab: 32, d_model: 32, n_heads: 1, n_layers: 2, d_ff: 128, max_len: 24, positions: "rotary", seed: 6 },
  batch: 32,
  lr: 3e-3,
  steps: 450,
  /** formed: the held-out accuracy on predictable positions at least this */
  formed: 0.9,
};

/**
 * The own-text widget's presets: a few sizes, each with its batch, context and learning
 * rate. "small" is the one the goal names (Tiny Shakespeare, <= 2.5 nats held out
 * within 3 minutes).
 */
export const PRESETS = {
  tiny: { label: "tiny (about 20k parameters)", d_model: 32, n_heads: 2, n_layers: 1, d_ff: 128, max_len: 32, batch: 16, lr: 3e-3 },
  small: { label: "small (about 65k parameters)", d_model: 48, n_heads: 4, n_layers: 2, d_ff: 192, max_len: 48, batch: 16, lr: 3e-3 },
  medium: { label: "medium (about 160k parameters)", d_model: 64, n_heads: 4, n_layers: 3, d_ff: 256, max_len: 64, batch: 16, lr: 2e-3 },
};
