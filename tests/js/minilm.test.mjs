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

// tests/js/fixtures/wordpiece.json (scripts/make_tokenizer_fixture.py): the library's
// tokenizer (Hugging Face tokenizers) on edge cases, and what its normalizer and
// pre-tokenizer make of "a" + c + "b" for every code point c but the surrogates.
const golden = JSON.parse(readFileSync(`${root}tests/js/fixtures/wordpiece.json`, "utf8"));

// The library's Unicode tables (Rust crates) are older than node's: characters assigned
// since then it keeps as they are (it does not know them), and a few changed category
// (U+1734 and U+1171E were Mn, U+166D and U+111C9 punctuation). Those are the only
// differences let through, and there are fewer than a thousand of them.
const RECLASSIFIED = new Set([0x1734, 0x1171e, 0x166d, 0x111c9]);

test("every code point is dropped, a space, split off, kept or mapped as the library does", () => {
  const expected = (kind, ch, mapped) => ({
    drop: ["ab"], space: ["a", "b"], split: ["a", ch, "b"], keep: [`a${ch}b`],
    map: `a${mapped}b`.split(" "),
  })[kind];
  const shown = (words) => JSON.stringify(words).replace(/[^\x20-\x7e]/gu,
    (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
  const wrong = [];
  let seen = 0, differ = 0, newer = 0;
  for (const [kind, ranges] of Object.entries(golden.code_points)) {
    let m = 0;
    for (const [first, last] of ranges) {
      for (let cp = first; cp <= last; cp++) {
        const ch = String.fromCodePoint(cp);
        const want = expected(kind, ch, kind === "map" ? golden.mapped[m++] : null);
        const got = basicTokenize(`a${ch}b`);
        seen += 1;
        if (JSON.stringify(got) === JSON.stringify(want)) continue;
        if (RECLASSIFIED.has(cp) || (kind === "keep" && !/\p{Cn}/u.test(ch))) {
          newer += 1;
          continue;
        }
        differ += 1;
        if (wrong.length < 12) {
          wrong.push(`U+${cp.toString(16).toUpperCase().padStart(4, "0")} (${kind}): ` +
            `${shown(got)}, the library ${shown(want)}`);
        }
      }
    }
  }
  assert.equal(seen, 0x110000 - 0x800);
  assert.deepEqual(wrong, [], `${differ} code points differ`);
  assert.ok(newer < 1000, `${newer} characters newer than the library's Unicode tables`);
});

test("a capital sigma lowercases to σ at the end of a word too, as the library's per-character lowercase", () => {
  const sigma = golden.cases.find((c) => c.text === "ΟΔΟΣ ΚΑΛΟΣ");
  assert.deepEqual(basicTokenize(sigma.text), ["οδοσ", "καλοσ"]);
  assert.ok(sigma.tokens.includes("##σ") && !sigma.tokens.includes("##ς"));
});

test("lone surrogates are dropped, as the other C* characters the library drops", () => {
  assert.deepEqual(basicTokenize("a\ud800b c\udfffd \ud83d"), ["ab", "cd"]);
});

test("word pieces and ids of the library's edge cases", { skip: !exported && "run scripts/export_minilm.py" }, () => {
  const { manifest, enc } = load();
  assert.equal(createHash("sha256").update(manifest.vocab.join("\n")).digest("hex"), golden.vocab_sha256);
  assert.equal(golden.max_tokens, manifest.config.max_tokens);
  for (const c of golden.cases) {
    if (c.ids === null) {
      assert.throws(() => enc.tokenize(c.text), /no word piece/, JSON.stringify(c.text));
      continue;
    }
    const tokens = enc.tokenize(c.text);
    assert.deepEqual(tokens, c.tokens, `tokens of ${JSON.stringify(c.text)}`);
    assert.deepEqual(tokens.map((p) => manifest.vocab.indexOf(p)), c.ids);
  }
});
