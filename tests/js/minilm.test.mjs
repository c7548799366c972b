// The in-browser encoder (book/_static/runtime/encoder.mjs) against the NumPy library on the
// same dequantized int8 weights: identical word pieces, embeddings within 1e-4.
//
// tests/js/fixtures/minilm_parity.json holds the library's tokens and embeddings;
// scripts/export_minilm.py writes it with book/_static/models/minilm/minilm.{json,bin} (the
// weights are not committed: scripts/check-node.sh exports them first).
//
//   node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { basicTokenize, loadEncoder, wordPieces } from "../../book/_static/runtime/encoder.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/minilm_parity.json`, "utf8"));
const models = `${root}book/_static/models/minilm/`;
const exported = existsSync(`${models}minilm.bin`);

function load() {
  const manifest = JSON.parse(readFileSync(`${models}minilm.json`, "utf8"));
  const bin = readFileSync(`${models}minilm.bin`);
  return { manifest, bin, enc: loadEncoder(manifest, bin) };
}

test("word pieces: greedy longest match, ## inside a word, [UNK] when nothing fits", () => {
  const vocab = new Map([["token", 0], ["##izer", 1], ["##s", 2], ["un", 3]]);
  assert.deepEqual(wordPieces("tokenizers", vocab), ["token", "##izer", "##s"]);
  assert.deepEqual(wordPieces("tokenx", vocab), ["[UNK]"]);
  assert.deepEqual(basicTokenize("Café, DON'T!"), ["cafe", ",", "don", "'", "t", "!"]);
});

test("the exported weights are the ones the fixture was made from", { skip: !exported && "run scripts/export_minilm.py" }, () => {
  const { manifest, bin } = load();
  assert.equal(createHash("sha256").update(bin).digest("hex"), manifest.sha256);
  assert.equal(manifest.sha256, fixture.weights_sha256,
    "the fixture was made from other weights: run scripts/export_minilm.py");
  assert.ok(manifest.quantization.max_cosine_change < 0.05);
});

test("tokens and embeddings match the NumPy library", { skip: !exported && "run scripts/export_minilm.py" }, () => {
  const { enc } = load();
  assert.ok(fixture.cases.length >= 10);
  let worst = 0;
  for (const c of fixture.cases) {
    assert.deepEqual(enc.tokenize(c.text), c.tokens, `tokens of ${JSON.stringify(c.text)}`);
    const e = enc.encode(c.text);
    for (let i = 0; i < e.length; i++) worst = Math.max(worst, Math.abs(e[i] - c.embedding[i]));
  }
  assert.ok(worst < 1e-4, `largest embedding difference ${worst}`);
  const { tokens, weights } = enc.attention("The weather is lovely today.");
  assert.equal(weights.length, 6);
  assert.equal(weights[0].length, 12);
  const T = tokens.length;
  for (let i = 0; i < T; i++) {
    const s = weights[5][3].slice(i * T, (i + 1) * T).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(s - 1) < 1e-5);
  }
  assert.throws(() => enc.tokenize("   "), /no word piece/);
  // the widget's one forward pass: its embedding is encode's, bit for bit
  const one = enc.attention("The weather is lovely today.").embedding;
  assert.equal(enc.attention("The weather is lovely today.").truncated, false);
  const long = enc.attention("one two three ".repeat(30));
  assert.equal(long.truncated, true);
  assert.equal(long.tokens.length, fixture.max_tokens);
  assert.deepEqual(Array.from(one), Array.from(enc.encode("The weather is lovely today.")));
});
