// The stories260K tokenizer (transformer.mjs's Llama2cTokenizer) against the library's
// (attention_lib.data.llama_tokenizer): the same ids on long texts, and time that grows as
// n log n, not n^2, with the length of a text.
//
// tests/js/fixtures/llama_tokenizer.json: scripts/make_tokenizer_fixture.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Llama2cTokenizer } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/llama_tokenizer.json`, "utf8"));
const manifest = JSON.parse(readFileSync(`${root}book/_static/models/stories260k.json`, "utf8"));
const tokenizer = () => new Llama2cTokenizer(manifest.tokenizer);

test("the ids of the library's tokenizer, on long texts and characters outside the vocabulary", () => {
  const tok = tokenizer();
  assert.ok(fixture.cases.some((c) => c.text.length >= 16000));
  for (const c of fixture.cases) {
    assert.deepEqual(tok.encode(c.text), c.ids, `ids of ${JSON.stringify(c.text.slice(0, 40))}`);
    assert.equal(tok.decode(c.ids), c.text);
  }
});

test("a text four times as long takes less than eight times as long (not quadratic)", () => {
  const letters = "abcdefghijklmnopqrstuvwxyz";
  let state = 1;
  const word = (n) => Array.from({ length: n }, () => {
    state = (state * 48271) % 2147483647;
    return letters[state % 26];
  }).join("");
  const short = word(4000), long = word(16000);
  const best = (text) => {
    let ms = Infinity;
    for (let run = 0; run < 9; run++) {
      const tok = tokenizer(); // no cache of earlier runs
      const t0 = performance.now();
      tok.encode(text);
      ms = Math.min(ms, performance.now() - t0);
    }
    return ms;
  };
  best(short); // warm the JIT on both, then the best of nine runs each
  best(long);
  const ratio = best(long) / best(short);
  assert.ok(ratio < 8, `16,000 characters take ${ratio.toFixed(1)} times as long as 4,000`);
});

test("a lone surrogate is refused by name, as the library refuses text it cannot write in UTF-8", () => {
  const tok = tokenizer();
  for (const [text, at] of [["a\ud800b", 1], ["\udc00", 0], ["ok 🙂 \ud83d", 5]]) {
    assert.throws(() => tok.encode(text), (err) => err instanceof RangeError &&
      new RegExp(`lone surrogate U\\+D[89A-F][0-9A-F]{2} at character ${at}\\b`).test(err.message), JSON.stringify(text));
  }
  assert.deepEqual(tok.decode(tok.encode("🙂 outside the BMP")), "🙂 outside the BMP");
});
