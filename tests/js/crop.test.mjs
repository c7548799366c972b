// Generation past the context (cropped), as the library does it: greedy ids equal the
// library's far past max_len (tests/js/fixtures/crop.json, scripts/make_parity_fixture.py),
// the re-encoding happens where the rule says, and crop: false keeps the old error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/crop.json`, "utf8"));
const load = (name) => loadModel(JSON.parse(readFileSync(`${root}book/_static/models/${name}.json`, "utf8")),
  readFileSync(`${root}book/_static/models/${name}.bin`));

for (const [name, ref] of Object.entries(fixture.models)) {
  test(`${name}: greedy ids past the context equal the library's (cropped generation)`, (t) => {
    const model = load(name);
    assert.equal(model.maxLen, ref.max_len);
    for (const c of ref.cases) {
      assert.deepEqual(model.tokenizer.encode(c.prompt), c.ids);
      assert.ok(c.ids.length + c.new_ids.length > model.maxLen + 100, "the case does not go far past the context");
      const t0 = performance.now();
      const ids = model.generate(c.ids, c.new_ids.length, { temperature: 0 });
      const ms = performance.now() - t0;
      const first = ids.findIndex((id, i) => id !== c.new_ids[i]);
      assert.equal(first, -1, `${name}: token ${first} after ${JSON.stringify(c.prompt.slice(0, 20))} differs`);
      t.diagnostic(`${name}: ${ids.length} tokens (${c.ids.length}-token prompt, context ${model.maxLen}) in ${ms.toFixed(0)} ms`);
    }
  });
}

test("shakespeare: the window is re-encoded from its last half when the cache is full", () => {
  const model = load("shakespeare");
  const W = model.maxLen;
  const prompt = model.tokenizer.encode("ROMEO:");
  const steps = [...model.steps(prompt, 2 * W, { temperature: 0, attention: true })];
  // The first W - len(prompt) + 1 tokens come from one cache, filled to W positions. Then
  // each window starts from H = W / 2 re-encoded tokens and gives W - H + 1 tokens (one
  // from the re-encoded window's last position, W - H from the ones fed after it).
  const H = W / 2;
  const n0 = W - prompt.length + 1;
  steps.forEach((s, i) => {
    const offset = i < n0 ? 0 : prompt.length + n0 - H + Math.floor((i - n0) / (W - H + 1)) * (W - H + 1);
    assert.equal(s.offset, offset, `step ${i}`);
    // the attention of the token that chose it covers the window from offset to its position
    assert.equal(s.attention[0][0].length, s.position - s.offset + 1, `step ${i}`);
    assert.ok(s.position - s.offset + 1 >= W / 2 || i < n0, `step ${i} read fewer than half a window`);
  });
  // a prompt longer than the context is cut to its last W tokens
  const long = model.tokenizer.encode("To be, or not to be: that is the question. ".repeat(8));
  const [first] = model.steps(long, 1, { temperature: 0 });
  const [same] = model.steps(long.slice(-W), 1, { temperature: 0 });
  assert.equal(first.id, same.id);
  assert.equal(first.offset, long.length - W);
});

test("crop: false keeps the old error; nothing is refused with the default", () => {
  const model = load("shakespeare");
  const prompt = model.tokenizer.encode("ROMEO:");
  assert.throws(() => model.generate(prompt, model.maxLen, { temperature: 0, crop: false }), /exceeds the context of 128 tokens/);
  assert.equal(model.generate(prompt, model.maxLen, { temperature: 0 }).length, model.maxLen);
  // within the context, crop changes nothing
  const a = model.generate(prompt, 50, { temperature: 0.8, seed: 3 });
  const b = model.generate(prompt, 50, { temperature: 0.8, seed: 3, crop: false });
  assert.deepEqual(a, b);
});
