// Beam search in the runtime is the library's: JS beam 4 = library beam 4 on the sentences of
// the translation test set (tests/js/fixtures/beam.json, written by
// scripts/make_parity_fixture.py from attention_lib's beam_search), and a sentence's
// translation never depends on the other sentences decoded beside it.
//
// The test command decodes every BEAM_EVERY-th sentence (default 5: 290 of 1,450, spread over
// the whole set and so over every length); BEAM_EVERY=1 decodes them all, as the weekly
// workflow does (.github/workflows/newest.yml).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/beam.json`, "utf8"));
const manifest = JSON.parse(readFileSync(`${root}book/_static/models/translator.json`, "utf8"));
const model = loadModel(manifest, readFileSync(`${root}book/_static/models/translator.bin`));
const every = Number(process.env.BEAM_EVERY ?? 5);
if (!Number.isInteger(every) || every < 1) {
  throw new Error(`BEAM_EVERY must be a whole number of at least 1, got ${JSON.stringify(process.env.BEAM_EVERY)}`);
}
const cases = fixture.cases.filter((_, i) => i % every === 0);

test("the beam fixture was made from the exported weights, on the whole test set", () => {
  assert.equal(fixture.weights_sha256, manifest.sha256, "run scripts/make_parity_fixture.py --beam-only");
  assert.ok(fixture.cases.length >= 1400, `only ${fixture.cases.length} sentences in the fixture`);
});

test(`beam ${fixture.beam}: the runtime's translation of every ${every === 1 ? "" : `${every}th `}test sentence is the library's`, (t) => {
  const t0 = performance.now();
  const sources = cases.map((c) => model.sourceIds(c.source).src);
  cases.forEach((c, i) => assert.deepEqual(sources[i], c.ids, `encode(${JSON.stringify(c.source)})`));
  const wrong = [];
  for (let at = 0; at < sources.length; at += 32) {
    const out = model.decodeBatch(sources.slice(at, at + 32), { beam: fixture.beam, lengthPenalty: fixture.length_penalty });
    out.forEach((o, j) => {
      const c = cases[at + j];
      if (o.ids.join() !== c.beam_ids.join()) {
        wrong.push(`${JSON.stringify(c.source)}: runtime ${JSON.stringify(model.tokenizer.decode(o.ids))}, ` +
          `library ${JSON.stringify(model.tokenizer.decode(c.beam_ids))}`);
      }
    });
  }
  const seconds = (performance.now() - t0) / 1000;
  t.diagnostic(`${cases.length} sentences, beam ${fixture.beam}, in ${seconds.toFixed(1)} s; ${wrong.length} differ`);
  console.log(`# beam ${fixture.beam}: ${cases.length} of ${fixture.cases.length} sentences in ${seconds.toFixed(1)} s, ${wrong.length} differ from the library`);
  assert.deepEqual(wrong, [], `${wrong.length} of ${cases.length} translations differ from the library's`);
});

test("beam search does not cut a sentence short when <eos> is merely among the top tokens", () => {
  const c = fixture.cases.find((x) => x.source.startsWith("How can you make your way in life"));
  assert.ok(c, "the test set has the sentence");
  const french = model.translate(c.source, { beam: 4 });
  assert.equal(french, model.tokenizer.decode(c.beam_ids));
  assert.notEqual(french, "Comment pouvez-", "the old runtime's truncated beam output");
  assert.ok(french.length > 25, french);
});

test("a sentence translates the same alone and beside longer ones (greedy and beam)", () => {
  const short = "Tom is here.";
  const long = "How can you make your way in life without a good education? I really want to know it now.";
  for (const beam of [1, 4]) {
    const alone = model.translate(short, { beam, details: true });
    const [withLong] = model.translateMany([short, long, long + " " + long], { beam, details: true });
    assert.deepEqual(withLong.ids, alone.ids, `beam ${beam}`);
    // the limit of a sentence is its own 2 S + 10 tokens
    assert.ok(alone.ids.length <= 2 * alone.src.length + 10);
  }
});

test("a beam wider than the runtime allows, or a bad length penalty, is refused before decoding", () => {
  const src = model.sourceIds("Tom is here.").src;
  assert.throws(() => model.decode(src, { beam: 100000 }), /beam must be an integer from 1 to 100/);
  assert.throws(() => model.decode(src, { beam: 2.5 }), /beam must be/);
  assert.throws(() => model.decode(src, { beam: 4, lengthPenalty: 400 }), /lengthPenalty must be a number from 0 to 10/);
  assert.throws(() => model.decode(src, { beam: 4, lengthPenalty: NaN }), /lengthPenalty/);
});
