// Finetuning chapter 11's model in the training worker (book/_static/runtime/train-finetune.mjs,
// task "finetune" of train-worker.mjs), driven directly in node with the site's own files
// (book/_static/models/shakespeare.json, .bin and shakespeare_heldout.txt):
//   - the untuned model's two held-out losses are measured first (the baseline), and the
//     adapted model starts exactly there (B = 0);
//   - LoRA trains r (n_in + n_out) numbers per adapted weight and leaves every base weight as
//     it was, bit for bit; full finetuning moves them all;
//   - both report the loss on the reader's held-out text and on held-out Shakespeare;
//   - characters outside Shakespeare's 65 are left out and counted; bad settings, a text
//     too short once they are left out, and a stop while the model loads, answered cleanly.
//
//   node --test tests/js/train-finetune.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createSession } from "../../book/_static/runtime/train-worker.mjs";
import { encodeFor, finetuneJob } from "../../book/_static/runtime/train-finetune.mjs";
import { fromRuntime } from "../../book/_static/runtime/train.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const bin = readFileSync(`${root}book/_static/models/shakespeare.bin`);
const BASE = {
  manifest: JSON.parse(readFileSync(`${root}book/_static/models/shakespeare.json`, "utf8")),
  weights: bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength),
  shakespeare: readFileSync(`${root}book/_static/models/shakespeare_heldout.txt`, "utf8"),
};
// the reader's text: English sentences (Tatoeba's, as chapter 10 uses), digits and all
const TEXT = readFileSync(`${root}data/tatoeba/test.tsv`, "utf8").split("\n").map((l) => l.split("\t")[0]).join("\n").slice(0, 6000);
const SMALL = { steps: 2, every: 1, heldOutWindows: 2, base: BASE };

/** A session whose slices run when run() is called; it waits for the model to load. */
function harness() {
  const out = [];
  const queue = [];
  const session = createSession((msg) => out.push(msg), (f) => queue.push(f));
  const run = async () => {
    for (let i = 0; i < 1000 && session.state === "loading"; i++) await new Promise((r) => setTimeout(r, 20));
    while (queue.length) queue.shift()();
  };
  return { out, session, run, of: (type) => out.filter((m) => m.type === type) };
}

test("LoRA: the baseline first, both held-out losses reported, the base left as it was", async () => {
  const { session, run, of, out } = harness();
  session.handle({ type: "start", task: "finetune", text: TEXT, mode: "lora", rank: 2, ...SMALL });
  await run();
  const [ready] = of("ready");
  assert.ok(ready, JSON.stringify(out.at(-1)));
  assert.equal(ready.trainable, 4 * 2 * 2 * (192 + 192)); // 4 blocks, q and v, rank 2
  assert.equal(ready.params, 1829441);
  assert.equal(ready.scaling, 16 / 2);
  const outside = Array.from(TEXT).filter((ch) => !BASE.manifest.tokenizer.chars.includes(ch));
  assert.ok(outside.length > 0, "a weak check: the text has only Shakespeare's characters");
  assert.equal(ready.dropped.count, outside.length);
  assert.deepEqual(ready.dropped.examples, [...new Set(outside)].slice(0, 8));
  const progress = of("progress");
  assert.equal(progress.length, 2);
  for (const p of progress) assert.ok(Number.isFinite(p.heldOut) && Number.isFinite(p.shakespeare));
  assert.ok(ready.before.shakespeare < ready.before.heldOut, "the model knows Shakespeare better than new text");
  assert.equal(of("done").length, 1);
  const { params } = fromRuntime(BASE.manifest, BASE.weights);
  const model = session.model;
  for (const name of ["blocks.0.ffn.fc1.W", "head.W", "tok.E", "blocks.3.attn.W_K"]) {
    assert.deepEqual(model.params[name], params[name], `${name} moved`);
  }
  for (const a of model.lora.adapters) assert.deepEqual(a.base, params[a.name], `${a.name}'s base moved`);
  assert.notDeepEqual(model.params["blocks.0.attn.W_Q"], params["blocks.0.attn.W_Q"], "W_Q = W0 + s A B did not move");
});

test("LoRA starts as the base model: B = 0 gives the untuned losses", async () => {
  const job = await finetuneJob({ text: TEXT, mode: "lora", rank: 4, heldOutWindows: 2, base: BASE });
  const plain = await finetuneJob({ text: TEXT, mode: "full", heldOutWindows: 2, base: BASE });
  assert.deepEqual(job.ready.before, plain.ready.before);
  assert.equal(plain.ready.trainable, plain.ready.params);
});

test("full finetuning moves every weight", async () => {
  const { session, run, of } = harness();
  session.handle({ type: "start", task: "finetune", text: TEXT, mode: "full", ...SMALL, steps: 1 });
  await run();
  assert.equal(of("progress").length, 1);
  const { params } = fromRuntime(BASE.manifest, BASE.weights);
  for (const name of ["blocks.0.ffn.fc1.W", "head.W", "blocks.3.attn.W_K"]) {
    assert.notDeepEqual(session.model.params[name], params[name], `${name} did not move`);
  }
});

test("characters outside the model's vocabulary are left out and counted", () => {
  const { ids, dropped } = encodeFor(["a", "b", " "], "ab é1 ba1");
  assert.deepEqual(Array.from(ids), [0, 1, 2, 2, 1, 0]);
  assert.deepEqual(dropped, { count: 3, examples: ["é", "1"] });
});

test("bad finetuning input: a sentence, and nothing trains", async () => {
  const cases = [
    [{ mode: "half", text: TEXT }, /mode must be "full" or "lora", got "half"/],
    [{ mode: "lora", rank: 3, text: TEXT }, /rank must be one of 1, 2, 4, 8, 16, got 3/],
    [{ mode: "lora", text: "short" }, /at least 660/],
    [{ mode: "full", text: "éü".repeat(1000) }, /Only 0 of the text's characters are in the model's vocabulary .* left out: é ü/],
  ];
  for (const [msg, pattern] of cases) {
    const { session, run, of } = harness();
    session.handle({ type: "start", task: "finetune", ...SMALL, ...msg });
    await run();
    const errors = of("error");
    assert.equal(errors.length, 1, `${JSON.stringify(msg).slice(0, 60)}: ${JSON.stringify(of("ready"))}`);
    assert.match(errors[0].message, pattern);
    assert.equal(of("progress").length, 0);
    assert.ok(["idle", "stopped"].includes(session.state));
  }
});

test("a stop while the model loads: nothing trains", async () => {
  const { session, run, of } = harness();
  session.handle({ type: "start", task: "finetune", text: TEXT, mode: "lora", ...SMALL });
  assert.equal(session.state, "loading");
  session.handle({ type: "stop" });
  await new Promise((r) => setTimeout(r, 300));
  await run();
  assert.equal(session.state, "stopped");
  assert.equal(of("ready").length, 0);
  assert.equal(of("progress").length, 0);
});
