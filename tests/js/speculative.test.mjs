// Speculative decoding in the runtime (book/_static/runtime/speculative.mjs) on the served
// Shakespeare model:
// - greedy output is plain greedy decoding's, id for id, for k = 1..8 with both drafts (prompt
//   lookup and the library's n-gram table, read from data/checkpoints/serving/ngram_draft.npz);
// - it is the library's speculative output, with the same counts of passes and accepted drafts
//   (tests/js/fixtures/speculative.json, scripts/make_speculative_fixture.py);
// - a wrong acceptance rule is caught; the sampled rule follows the target's distribution
//   (chi-square over 20,000 tokens); bad input is refused with a clear error.
//
//   node --test tests/js/speculative.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel, makeRng } from "../../book/_static/runtime/transformer.mjs";
import { SERVED } from "../../book/_static/runtime/quant.mjs";
import { NgramDraft, PromptLookup, acceptDrafts, speculativeGenerate } from "../../book/_static/runtime/speculative.mjs";
import { loadNgramDraft } from "./npz.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/speculative.json`, "utf8"));

function served(name) {
  const manifest = JSON.parse(readFileSync(`${root}book/_static/models/${SERVED[name]}.json`, "utf8"));
  const bin = readFileSync(`${root}book/_static/models/${SERVED[name]}.bin`);
  return { manifest, model: loadModel(manifest, bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength)) };
}

const { manifest, model } = served("shakespeare");
const V = model.config.n_vocab;
const drafts = { lookup: new PromptLookup(V), ngram: loadNgramDraft() };

test("the fixture was made from the served weights and the committed n-gram draft", () => {
  assert.equal(manifest.sha256, fixture.weights_sha256, "run scripts/make_speculative_fixture.py");
  const ngram = JSON.parse(readFileSync(`${root}data/checkpoints/serving/ngram_draft.json`, "utf8"));
  assert.equal(ngram.sha256, fixture.ngram_draft_sha256, "run scripts/make_speculative_fixture.py");
  assert.equal(fixture.cases.length >= 3, true);
});

for (const c of fixture.cases) {
  test(`greedy, k = 1..8, both drafts: plain greedy decoding's ids and the library's counts (${JSON.stringify(c.prompt)})`, () => {
    const greedy = model.generate(c.ids, fixture.n_new, { temperature: 0 });
    assert.deepEqual(greedy, c.greedy_ids, "plain greedy decoding differs from the library's");
    assert.equal(c.runs.length, 16);
    for (const run of c.runs) {
      const { ids, stats } = speculativeGenerate(model, drafts[run.draft], c.ids, fixture.n_new, { k: run.k });
      const what = `${run.draft}, k = ${run.k}`;
      assert.deepEqual(ids, greedy, `${what}: not plain greedy decoding's output`);
      assert.deepEqual(ids, run.new_ids, `${what}: not the library's speculative output`);
      assert.deepEqual([stats.targetPasses, stats.drafted, stats.accepted], [run.target_passes, run.drafted, run.accepted],
        `${what}: passes, drafted and accepted differ from the library's`);
    }
  });
}

test("the drafts propose what the library's propose", () => {
  assert.deepEqual(new PromptLookup(5).propose([1, 2, 3, 4, 1, 2], 3), [3, 4, 1]); // the library's doctest
  assert.deepEqual(new PromptLookup(5).propose([1, 2, 3], 2), [3, 3]); // no match: the last token again
  assert.deepEqual(new PromptLookup(5).propose([4, 1, 2, 4, 1], 4), [2, 4, 1, 1]); // padded with the last copied
  // the library's NgramDraft doctest: tables of "0 1 2 0 1 2" (order 2, 3 tokens)
  const d = new NgramDraft([{ keys: [0, 1, 2], labels: [1, 2, 0] }, { keys: [], labels: [] }], 3);
  assert.deepEqual(d.propose([2, 0], 4), [1, 2, 0, 1]);
});

test("a wrong acceptance rule is caught: keeping one draft too many changes the text", () => {
  const c = fixture.cases[1];
  let rejections = 0;
  // the right rule, by hand: keep while the draft is the target's argmax
  const p = [Float32Array.of(0, 3, 1), Float32Array.of(2, 1, 0), Float32Array.of(0, 0, 5)];
  assert.deepEqual(acceptDrafts(p, null, [1, 0]), { accepted: 2, next: 2 });
  assert.deepEqual(acceptDrafts(p, null, [1, 2]), { accepted: 1, next: 0 });
  assert.deepEqual(acceptDrafts(p, null, [2, 0]), { accepted: 0, next: 1 });
  // off by one (the first disagreement kept too): the output is no longer greedy decoding's
  const offByOne = (pp, q, drafted) => {
    const r = acceptDrafts(pp, q, drafted);
    if (r.accepted === drafted.length) return r;
    rejections += 1;
    return { accepted: r.accepted + 1, next: r.next };
  };
  const wrong = speculativeGenerate(model, drafts.lookup, c.ids, fixture.n_new, { k: 4, accept: offByOne });
  assert.ok(rejections > 0);
  assert.notDeepEqual(wrong.ids, c.greedy_ids);
});

/** Pearson's chi-square of counts against probabilities p (all > 0). */
function chiSquare(counts, p) {
  const n = counts.reduce((a, b) => a + b, 0);
  return counts.reduce((s, c, i) => s + (c - n * p[i]) ** 2 / (n * p[i]), 0);
}

test("sampled acceptance: the token written follows the target's p, whatever the draft (chi-square, 20,000 draws)", () => {
  const p = [Float64Array.of(0.1, 0.4, 0.2, 0.25, 0.05), Float64Array.of(0.3, 0.1, 0.2, 0.2, 0.2)];
  const q = [Float64Array.of(0.5, 0.1, 0.1, 0.1, 0.2)];
  const rng = makeRng(42);
  const N = 20000;
  const draw = (dist) => {
    let u = rng();
    for (let i = 0; i < dist.length; i++) if ((u -= dist[i]) < 0) return i;
    return dist.length - 1;
  };
  const first = (rule, oneHot) => {
    const counts = new Array(5).fill(0);
    for (let t = 0; t < N; t++) {
      const x = oneHot ? 3 : draw(q[0]);
      const r = rule(p, oneHot ? null : q, [x], rng);
      counts[r.accepted === 1 ? x : r.next] += 1; // the first token written
    }
    return counts;
  };
  // 18.47: chi-square with 4 degrees of freedom at p = 0.001
  const good = [first(acceptDrafts, false), first(acceptDrafts, true)].map((cnt) => chiSquare(cnt, p[0]));
  assert.ok(good.every((x) => x < 18.47), `chi-square ${good} against the target's p`);
  // a wrong rule (always keep the draft's token) fails the same test
  const naive = first(() => ({ accepted: 1, next: 0 }), false);
  assert.ok(chiSquare(naive, p[0]) > 18.47);
  console.log(`# chi-square (4 df): draft q ${good[0].toFixed(2)}, one-hot ${good[1].toFixed(2)}, wrong rule ${chiSquare(naive, p[0]).toFixed(0)}`);
});

test("sampled speculative decoding: seeded, in the vocabulary, the model as its own draft keeps every draft", () => {
  const c = fixture.cases[0];
  const a = speculativeGenerate(model, drafts.ngram, c.ids, 40, { k: 4, temperature: 0.8, seed: 7 });
  const b = speculativeGenerate(model, drafts.ngram, c.ids, 40, { k: 4, temperature: 0.8, seed: 7 });
  assert.deepEqual(a.ids, b.ids);
  assert.equal(a.ids.length, 40);
  assert.ok(a.ids.every((t) => Number.isInteger(t) && t >= 0 && t < V));
  const self = speculativeGenerate(model, model, c.ids, 20, { k: 3 });
  assert.deepEqual(self.ids, c.greedy_ids.slice(0, 20));
  assert.equal(self.stats.acceptance, 1);
});

test("bad input: k <= 0, a draft of another vocabulary, a prompt past the context", () => {
  const ids = fixture.cases[0].ids;
  for (const k of [0, -1, 1.5, "3"]) {
    assert.throws(() => speculativeGenerate(model, drafts.lookup, ids, 8, { k }), /k \(tokens the draft proposes per round\) must be an integer >= 1/);
  }
  assert.throws(() => speculativeGenerate(model, new PromptLookup(V + 1), ids, 8), /the draft has a vocabulary of 66 tokens but the target has 65/);
  assert.throws(() => speculativeGenerate(model, {}, ids, 8), /the draft must be a PromptLookup, an NgramDraft or a decoder model/);
  assert.throws(() => speculativeGenerate(model, drafts.lookup, ids, model.maxLen), /exceeds the context of 128 tokens/);
  assert.throws(() => speculativeGenerate(model, drafts.lookup, [V], 8), /token must be an integer id in \[0, 65\)/);
  assert.throws(() => speculativeGenerate(model, drafts.lookup, ids, 8, { temperature: -1 }), /temperature must be a number >= 0/);
  assert.throws(() => new NgramDraft([{ keys: [0], labels: [70] }], 65), /label 70 is not a token of a vocabulary of 65/);
  assert.throws(() => new PromptLookup(0), /nVocab must be an integer >= 1/);
});
