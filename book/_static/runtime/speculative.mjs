/**
 * Speculative decoding in the browser runtime (chapter 20; the library's
 * attention_lib/models/speculative.py, round for round).
 *
 * A cheap draft proposes k tokens; the target (a decoder of transformer.mjs) checks all of them
 * in ONE pass over k + 1 rows with its KV cache (forwardRows(..., allRows = true)), keeps the
 * longest prefix it agrees with and adds one token of its own: between 1 and k + 1 tokens per
 * pass of the target. Rewinding after a rejection moves the cache's length back (no copy).
 *
 * - Greedy (temperature 0): a drafted token is kept while it is the target's argmax; the first
 *   disagreement is replaced by the target's argmax. The text is plain greedy decoding's, id
 *   for id (tests/js/speculative.test.mjs).
 * - Sampled (Leviathan et al., 2023; Chen et al., 2023): the drafted x, drawn from the draft's q,
 *   is kept with probability min(1, p(x) / q(x)); at the first rejection the token is drawn from
 *   max(0, p - q) renormalised, and after k acceptances from the target's next p. Every token
 *   then follows the target's p exactly, whatever the draft.
 *
 * Drafts: PromptLookup (copy what followed the last n tokens earlier in the text; no weights)
 * and NgramDraft (the library's table distilled from the target, ngram_draft.py), both one-hot
 * proposals; or another decoder of the same vocabulary (stepped with its own cache).
 *
 *   const { ids, stats } = speculativeGenerate(model, new PromptLookup(65), prompt, 64, { k: 4 });
 */
import { argmax, makeRng } from "./transformer.mjs";

/** The vocabulary size of a target or a draft (a decoder's config, or a draft's nVocab). */
function vocabOf(m) {
  if (m && Number.isInteger(m.nVocab)) return m.nVocab;
  if (m && m.config && Number.isInteger(m.config.n_vocab)) return m.config.n_vocab;
  throw new TypeError("the draft must be a PromptLookup, an NgramDraft or a decoder model (it has no vocabulary size)");
}

function positiveInt(value, name) {
  if (!(Number.isInteger(value) && value >= 1)) throw new RangeError(`${name} must be an integer >= 1, got ${value}`);
  return value;
}

/**
 * Prompt lookup (Saxena, 2023): the tokens that followed the latest earlier occurrence of the
 * text's last n tokens (n from `ngram` down to 1); without any, the last token again. As the
 * library's PromptLookup: new PromptLookup(5).propose([1, 2, 3, 4, 1, 2], 3) is [3, 4, 1].
 */
export class PromptLookup {
  constructor(nVocab, ngram = 3) {
    this.nVocab = positiveInt(nVocab, "nVocab");
    this.ngram = positiveInt(ngram, "ngram");
    this.maxLen = Infinity;
  }

  propose(ids, k) {
    const T = ids.length;
    for (let n = Math.min(this.ngram, T - 1); n >= 1; n--) {
      // the latest window ending before the last token that equals the last n tokens
      for (let s = T - 1 - n; s >= 0; s--) {
        let same = true;
        for (let j = 0; j < n && same; j++) same = ids[s + j] === ids[T - n + j];
        if (!same) continue;
        const copied = ids.slice(s + n, s + n + k);
        while (copied.length < k) copied.push(copied[copied.length - 1]);
        return copied;
      }
    }
    return new Array(k).fill(ids[T - 1]);
  }
}

/**
 * The library's NgramDraft (attention_lib/models/ngram_draft.py): for the last n tokens (n from
 * the table's order down to 1) the target's most frequent argmax after them in its training
 * text. tables[n - 1] = {keys, labels}: the contexts of n tokens as base-nVocab integers (the
 * oldest token the most significant digit) and their labels. A key is exact in a double while
 * nVocab ** order < 2 ** 53.
 */
export class NgramDraft {
  constructor(tables, nVocab) {
    this.nVocab = positiveInt(nVocab, "nVocab");
    if (!Array.isArray(tables) || tables.length === 0) throw new RangeError("tables must hold at least the order-1 table");
    if (this.nVocab ** tables.length >= 2 ** 53) {
      throw new RangeError(`order ${tables.length} with ${this.nVocab} tokens: the context keys are not exact in a double`);
    }
    this.maps = tables.map(({ keys, labels }, i) => {
      if (keys.length !== labels.length) throw new RangeError(`tables[${i}]: ${keys.length} keys but ${labels.length} labels`);
      const map = new Map();
      for (let j = 0; j < keys.length; j++) {
        const label = Number(labels[j]);
        if (!(Number.isInteger(label) && label >= 0 && label < this.nVocab)) {
          throw new RangeError(`tables[${i}]: label ${label} is not a token of a vocabulary of ${this.nVocab}`);
        }
        map.set(Number(keys[j]), label);
      }
      return map;
    });
    this.order = tables.length;
    this.fallback = tables[0].labels.length ? Number(tables[0].labels[0]) : 0;
    this.maxLen = Infinity;
  }

  next(ctx) {
    const V = this.nVocab;
    const keys = [];
    let key = 0;
    let scale = 1;
    for (let j = 0; j < Math.min(this.order, ctx.length); j++) {
      key += ctx[ctx.length - 1 - j] * scale;
      scale *= V;
      keys.push(key);
    }
    for (let n = keys.length; n >= 1; n--) {
      const label = this.maps[n - 1].get(keys[n - 1]);
      if (label !== undefined) return label;
    }
    return this.fallback;
  }

  propose(ids, k) {
    const ctx = ids.slice(Math.max(0, ids.length - this.order));
    const out = [];
    for (let i = 0; i < k; i++) {
      const t = this.next(ctx);
      ctx.push(t);
      out.push(t);
    }
    return out;
  }
}

/** softmax(logits / temperature) in double precision. */
function softmaxT(logits, temperature) {
  const p = new Float64Array(logits.length);
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    p[i] = logits[i] / temperature;
    if (!Number.isFinite(p[i])) {
      throw new RangeError(`temperature ${temperature} is too small: logits / temperature is not finite`);
    }
    if (p[i] > max) max = p[i];
  }
  let total = 0;
  for (let i = 0; i < p.length; i++) total += p[i] = Math.exp(p[i] - max);
  for (let i = 0; i < p.length; i++) p[i] /= total;
  return p;
}

/** A token drawn from the distribution p (weights, not necessarily summing to 1) at u * total. */
function drawFrom(p, u) {
  let total = 0;
  for (let i = 0; i < p.length; i++) total += p[i];
  let acc = u * total;
  let last = 0;
  for (let i = 0; i < p.length; i++) {
    if (p[i] > 0) last = i;
    acc -= p[i];
    if (acc < 0 && p[i] > 0) return i;
  }
  return last;
}

/**
 * The acceptance rule for one round. p: k + 1 rows, the target's distributions (greedy: its
 * logits) at the drafted positions and the one after; q: the draft's k distributions, or null
 * for one-hot proposals (lookup, table); drafted: k ids; rng: null for greedy, else a function
 * returning uniforms in [0, 1). Returns {accepted, next}: how many drafts to keep, and the
 * target's token after them.
 */
export function acceptDrafts(p, q, drafted, rng = null) {
  const k = drafted.length;
  if (rng === null) {
    let n = 0;
    while (n < k && argmax(p[n]) === drafted[n]) n++;
    return { accepted: n, next: argmax(p[n]) };
  }
  for (let n = 0; n < k; n++) {
    const x = drafted[n];
    const qx = q ? q[n][x] : 1;
    if (rng() * qx < p[n][x]) continue; // u < p(x) / q(x), without dividing by 0
    const resid = new Float64Array(p[n].length);
    let total = 0;
    for (let i = 0; i < resid.length; i++) {
      const qi = q ? q[n][i] : i === x ? 1 : 0;
      total += resid[i] = Math.max(0, p[n][i] - qi);
    }
    // p = q exactly leaves no residual (a rejection then has probability 0): draw from p
    return { accepted: n, next: drawFrom(total > 0 ? resid : p[n], rng()) };
  }
  return { accepted: k, next: drawFrom(p[k], rng()) };
}

/** Keep the first n positions of every layer's cache (the rejected drafts' rows are overwritten). */
function rewind(cache, n) {
  for (const layer of cache) layer.length = Math.min(layer.length, n);
}

/**
 * Continue promptIds by maxNewTokens tokens, k drafted per round; returns {ids (the new ids),
 * stats: {targetPasses, drafted, accepted, acceptance, tokensPerPass}} as the library's
 * speculative_generate (targetPasses counts rounds; the prompt runs in the first round's pass).
 * options: k (default 4), temperature (0: greedy), seed (for sampling), accept (the acceptance
 * rule, acceptDrafts by default; the tests replace it with a wrong one). The prompt and the new
 * tokens must fit in the target's (and a model draft's) context, as in the library.
 */
export function speculativeGenerate(target, draft, promptIds, maxNewTokens, options = {}) {
  const { k: kOpt = 4, temperature = 0, seed = 0, accept = acceptDrafts } = options;
  if (!target || typeof target.forwardRows !== "function" || typeof target.newCache !== "function") {
    throw new TypeError("the target must be a decoder model of transformer.mjs (forwardRows, newCache)");
  }
  if (!draft || (typeof draft.propose !== "function" && typeof draft.forwardRows !== "function")) {
    throw new TypeError("the draft must be a PromptLookup, an NgramDraft or a decoder model");
  }
  if (!(Number.isInteger(kOpt) && kOpt >= 1)) {
    throw new RangeError(`k (tokens the draft proposes per round) must be an integer >= 1, got ${kOpt}`);
  }
  const V = vocabOf(target);
  const vd = vocabOf(draft);
  if (vd !== V) {
    throw new RangeError(`the draft has a vocabulary of ${vd} tokens but the target has ${V}: ` +
      "speculative decoding needs both to read and write the same tokens");
  }
  if (!(Number.isFinite(temperature) && temperature >= 0)) {
    throw new RangeError(`temperature must be a number >= 0, got ${temperature}`);
  }
  const ids = Array.from(promptIds ?? []);
  if (ids.length === 0) throw new RangeError("the prompt must hold at least one token");
  for (const t of ids) {
    if (!(Number.isInteger(t) && t >= 0 && t < V)) throw new RangeError(`token must be an integer id in [0, ${V}), got ${t}`);
  }
  if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 0)) {
    throw new RangeError(`maxNewTokens must be an integer >= 0, got ${maxNewTokens}`);
  }
  const limit = Math.min(target.maxLen, draft.maxLen ?? Infinity);
  if (ids.length + maxNewTokens > limit) {
    throw new RangeError(`prompt (${ids.length}) + maxNewTokens (${maxNewTokens}) exceeds the context of ` +
      `${limit} tokens (the smaller of the target's and the draft's)`);
  }
  const sample = temperature > 0;
  const rng = sample ? makeRng(seed) : null;
  const start = ids.length;
  const cache = target.newCache();
  const modelDraft = typeof draft.propose !== "function";
  const dCache = modelDraft ? draft.newCache() : null;
  const stats = { targetPasses: 0, drafted: 0, accepted: 0 };
  const rows = (logits, n) => Array.from({ length: n }, (_, r) => logits.subarray(r * V, (r + 1) * V));
  while (ids.length - start < maxNewTokens) {
    const kk = Math.min(kOpt, maxNewTokens - (ids.length - start) - 1);
    if (kk === 0) { // one token left: the target alone
      const { logits } = target.forwardRows(ids.slice(cache[0].length), cache);
      ids.push(sample ? drawFrom(softmaxT(logits, temperature), rng()) : argmax(logits));
      stats.targetPasses += 1;
      continue;
    }
    let drafted;
    let q = null;
    if (!modelDraft) {
      drafted = draft.propose(ids, kk);
    } else {
      drafted = [];
      q = sample ? [] : null;
      let feed = ids.slice(dCache[0].length);
      for (let i = 0; i < kk; i++) {
        const { logits } = draft.forwardRows(feed, dCache);
        let x;
        if (sample) {
          const qd = softmaxT(logits, temperature);
          q.push(qd);
          x = drawFrom(qd, rng());
        } else {
          x = argmax(logits);
        }
        drafted.push(x);
        feed = [x];
      }
    }
    // the target's one pass: the tokens its cache lacks (the last one kept) and the k drafts
    const fed = ids.slice(cache[0].length).concat(drafted);
    const { logits } = target.forwardRows(fed, cache, false, true);
    let p = rows(logits, fed.length).slice(fed.length - kk - 1);
    if (sample) p = p.map((z) => softmaxT(z, temperature));
    const { accepted, next } = accept(p, q, drafted, rng);
    for (let i = 0; i < accepted; i++) ids.push(drafted[i]);
    ids.push(next);
    stats.targetPasses += 1;
    stats.drafted += kk;
    stats.accepted += accepted;
    rewind(cache, ids.length - 1);
    if (dCache) rewind(dCache, ids.length - 1);
  }
  stats.acceptance = stats.accepted / Math.max(stats.drafted, 1);
  stats.tokensPerPass = maxNewTokens / Math.max(stats.targetPasses, 1);
  return { ids: ids.slice(start), stats };
}
