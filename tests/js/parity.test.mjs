// The browser runtime against the NumPy library: same greedy tokens, logits within 1e-3.
//
// tests/js/fixtures/parity.json holds, for each exported model and each of its prompts, the
// library's prompt ids, its greedy continuation and its logits at the first and last step
// (scripts/make_parity_fixture.py writes it; tests/test_parity_fixture.py keeps it current).
//
//   node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/parity.json`, "utf8"));
const TOLERANCE = 1e-3;

export function load(name) {
  const manifest = JSON.parse(readFileSync(`${root}book/_static/models/${name}.json`, "utf8"));
  const bin = readFileSync(`${root}book/_static/models/${name}.bin`);
  return { manifest, bin, model: loadModel(manifest, bin) };
}

function maxAbsDiff(a, b) {
  assert.equal(a.length, b.length, "logit vectors differ in length");
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test("the fixture covers every model and at least 20 prompts each", () => {
  for (const name of ["shakespeare", "stories260k", "translator"]) {
    assert.ok(fixture.models[name], `no reference for ${name} in the fixture`);
    assert.ok(fixture.models[name].cases.length >= 20, `${name}: fewer than 20 prompts`);
  }
});

for (const [name, ref] of Object.entries(fixture.models)) {
  test(`${name}: the exported weights are the ones the fixture was made from`, () => {
    const { manifest, bin } = load(name);
    const digest = createHash("sha256").update(bin).digest("hex");
    assert.equal(digest, manifest.sha256, `${name}.bin does not match its manifest`);
    assert.equal(manifest.sha256, ref.weights_sha256,
      `${name}: the fixture was made from other weights; run scripts/make_parity_fixture.py`);
  });

  test(`${name}: tokenizer, greedy tokens and logits match the NumPy library`, (t) => {
    const { model } = load(name);
    let worst = 0;
    for (const c of ref.cases) {
      if (model.translate) {
        // the translator: greedy French ids, then the decoder's logits teacher-forced on them
        const out = model.translate(c.prompt, { details: true });
        assert.deepEqual(out.src, c.ids, `${name}: encode(${JSON.stringify(c.prompt)})`);
        assert.deepEqual(out.ids, c.new_ids, `${name}: greedy translation of ${JSON.stringify(c.prompt)}`);
        const state = model.newState(model.encode(c.ids));
        const logits = [model.config.bos_id, ...c.new_ids].map((t) => model.step(t, state).logits);
        worst = Math.max(worst, maxAbsDiff(logits[0], c.logits_first),
          maxAbsDiff(logits[logits.length - 1], c.logits_last));
        continue;
      }
      assert.deepEqual(model.tokenizer.encode(c.prompt), c.ids, `${name}: encode(${JSON.stringify(c.prompt)})`);
      const steps = [...model.steps(c.ids, c.new_ids.length, { temperature: 0 })];
      assert.deepEqual(steps.map((s) => s.id), c.new_ids, `${name}: greedy tokens after ${JSON.stringify(c.prompt)}`);
      worst = Math.max(worst, maxAbsDiff(steps[0].logits, c.logits_first),
        maxAbsDiff(steps[steps.length - 1].logits, c.logits_last));
    }
    t.diagnostic(`${name}: max |logit difference| = ${worst.toExponential(2)} over ${ref.cases.length} prompts`);
    console.log(`# ${name}: max |logit difference| = ${worst.toExponential(2)} over ${ref.cases.length} prompts`);
    assert.ok(worst <= TOLERANCE, `${name}: max |logit difference| ${worst} > ${TOLERANCE}`);
  });

  test(`${name}: seeded sampling is reproducible, and the seed matters`, { skip: name === "translator" }, () => {
    const { model } = load(name);
    const prompt = ref.cases[1].ids;
    const opts = { temperature: 1.0, topK: 40, topP: 0.9, seed: 1234 };
    const a = model.generate(prompt, 24, opts);
    const b = model.generate(prompt, 24, opts);
    assert.deepEqual(a, b);
    const others = [1, 2, 3].map((seed) => model.generate(prompt, 24, { ...opts, seed }).join());
    assert.ok(others.some((o) => o !== a.join()), "four seeds gave the same sample");
  });
}

test("stories260k: a byte token displays as its character, and decodes as text", () => {
  const { model } = load("stories260k");
  const tok = model.tokenizer;
  const newline = tok.tokens.indexOf("<0x0A>");
  assert.ok(newline >= 0, "the vocabulary has no <0x0A> token");
  assert.equal(tok.piece(newline), "\n", "the widget would show <0x0A> instead of a newline");
  assert.equal(tok.decode([tok.bosId, ...tok.encode("Hi", { bos: false }), newline]), "Hi\n");
  const high = tok.tokens.indexOf("<0xC3>");
  assert.equal(tok.piece(high), "<0xC3>", "half a UTF-8 character has no character to show");
});
