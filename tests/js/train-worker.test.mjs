// The training worker's session (book/_static/runtime/train-worker.mjs), driven directly in
// node: it trains, reports, pauses, resumes and stops, generates from and exports what it
// trained, and answers bad input with a message instead of a crash or a NaN.
//
//   node --test tests/js/train-worker.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkText, createSession } from "../../book/_static/runtime/train-worker.mjs";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

/** A session whose scheduled slices run when run() is called; messages out are collected. */
function harness() {
  const out = [];
  const queue = [];
  const session = createSession((msg) => out.push(msg), (f) => queue.push(f));
  const run = (slices = Infinity) => {
    for (let i = 0; i < slices && queue.length; i++) queue.shift()();
  };
  return { out, session, run, of: (type) => out.filter((m) => m.type === type) };
}

const TEXT = "the cat sat on the mat. the dog sat on the log. ".repeat(30);

test("induction task: trains, reports both layers' maps and scores, and finishes", () => {
  const { session, run, of } = harness();
  session.handle({ type: "start", task: "induction", steps: 20, every: 10 });
  run();
  const progress = of("progress");
  assert.equal(progress.length, 2);
  for (const p of progress) {
    assert.ok(Number.isFinite(p.loss) && p.loss > 0);
    assert.equal(p.maps.length, 2);
    assert.equal(p.maps[0].length, 24 * 24);
    assert.ok(p.scores.previous >= 0 && p.scores.previous <= 1);
  }
  assert.notDeepEqual(progress[0].maps[1], progress[1].maps[1], "the maps did not change");
  assert.equal(of("done").length, 1);
  assert.equal(session.state, "done");
});

test("pause stops the steps, resume continues them, stop ends them", () => {
  const { session, run, of } = harness();
  session.handle({ type: "start", task: "text", text: TEXT, preset: "tiny", every: 1, steps: 1000 });
  run(2);
  session.handle({ type: "pause" });
  const at = session.step;
  run();
  assert.equal(session.step, at, "steps ran while paused");
  assert.equal(of("paused").length, 1);
  session.handle({ type: "resume" });
  run(2);
  assert.ok(session.step > at);
  session.handle({ type: "stop" });
  const stoppedAt = session.step;
  run();
  assert.equal(session.step, stoppedAt);
  assert.equal(session.state, "stopped");
});

test("own text: the held-out loss falls; Generate and the exported files work", () => {
  const { session, run, of } = harness();
  session.handle({ type: "start", task: "text", text: TEXT, preset: "tiny", every: 30, steps: 150, lr: 1e-2 });
  run();
  const progress = of("progress");
  assert.ok(progress.at(-1).heldOut < progress[0].heldOut - 0.5, `held-out ${progress[0].heldOut} -> ${progress.at(-1).heldOut}`);
  session.handle({ type: "generate", prompt: "the ", n: 40, temperature: 0 });
  const [gen] = of("generated");
  assert.ok(gen.text.startsWith("the "));
  assert.equal(Array.from(gen.text).length, 44);
  session.handle({ type: "export" });
  const [{ manifest, weights }] = of("exported");
  const model = loadModel(JSON.parse(JSON.stringify(manifest)), weights);
  assert.equal(model.tokenizer.decode(model.generate(model.tokenizer.encode("the "), 40, { temperature: 0 })), gen.text.slice(4));
});

test("bad input: a message, never a crash or a NaN loss", () => {
  const { session, run, of, out } = harness();
  const cases = [
    [{ type: "start", task: "text", text: "", preset: "tiny" }, /at least/],
    [{ type: "start", task: "text", text: "a", preset: "tiny" }, /at least/],
    [{ type: "start", task: "text", text: "a".repeat(400), preset: "tiny" }, /only one distinct character/],
    [{ type: "start", task: "text", text: "x".repeat(1_300_000), preset: "tiny" }, /at most 1,200,000/],
    [{ type: "start", task: "text", text: TEXT, preset: "tiny", lr: 0 }, /learning rate/],
    [{ type: "start", task: "text", text: TEXT, preset: "tiny", lr: NaN }, /learning rate/],
    [{ type: "generate", prompt: "x" }, /Train a model first/],
    [{ type: "start", task: "nonsense" }, /unknown task/],
  ];
  for (const [msg, pattern] of cases) {
    const before = out.length;
    session.handle(msg);
    const errors = out.slice(before).filter((m) => m.type === "error");
    assert.equal(errors.length, 1, `no error message for ${JSON.stringify(msg).slice(0, 80)}`);
    assert.match(errors[0].message, pattern);
  }
  assert.equal(session.state, "idle");
  // characters outside the BMP train as one token each
  const emoji = "😀🐍🎉 a b ".repeat(60);
  session.handle({ type: "start", task: "text", text: emoji, preset: "tiny", steps: 5, every: 5 });
  assert.equal(of("ready").at(-1).vocab, 6);
  // pressing Train twice: the second start is refused while the first runs
  session.handle({ type: "start", task: "text", text: emoji, preset: "tiny" });
  assert.match(of("error").at(-1).message, /already running/);
  run();
  assert.ok(of("progress").every((p) => Number.isFinite(p.loss) && Number.isFinite(p.heldOut)));
  assert.equal(checkText("ab".repeat(1000), "tiny"), null);
});

test("start: steps, every, heldOutWindows and seed that are not whole numbers are refused by name", () => {
  for (const task of ["text", "induction"]) {
    for (const [key, value] of [["steps", NaN], ["steps", 0], ["steps", -1], ["steps", 2.5], ["steps", "7"],
      ["every", 0], ["every", NaN], ["heldOutWindows", 0], ["heldOutWindows", NaN], ["seed", -1], ["seed", "x"]]) {
      const { session, run, of, out } = harness();
      session.handle({ type: "start", task, text: TEXT, preset: "tiny", [key]: value });
      run(20); // nothing may be left spinning without steps or without reports
      const errors = of("error");
      assert.equal(errors.length, 1, `${task}: no error for ${key} = ${String(value)}`);
      const shown = typeof value === "string" ? JSON.stringify(value) : String(value);
      assert.ok(errors[0].message.startsWith(`${key} must be an integer >= `) &&
        errors[0].message.endsWith(`, got ${shown}`), errors[0].message);
      assert.equal(session.state, "idle", `${task}, ${key} = ${String(value)}`);
      assert.deepEqual(out.filter((m) => m.type === "ready" || m.type === "progress"), []);
    }
  }
});

test("generate: n, temperature and seed are checked by the names the message uses", () => {
  const { session, run, of } = harness();
  session.handle({ type: "start", task: "text", text: TEXT, preset: "tiny", steps: 5, every: 5 });
  run();
  for (const [key, value, pattern] of [["n", NaN, /^n must be an integer from 1 to 2000, got NaN/],
    ["n", "7", /^n must be an integer from 1 to 2000, got "7"/], ["n", 2.5, /^n must be an integer/],
    ["n", 0, /^n must be an integer/], ["temperature", -1, /^temperature must be a number >= 0, got -1/],
    ["temperature", "hot", /^temperature must be a number >= 0, got "hot"/], ["seed", 1.5, /^seed must be an integer >= 0/]]) {
    const before = of("error").length;
    session.handle({ type: "generate", prompt: "the ", n: 5, [key]: value });
    assert.equal(of("error").length, before + 1, `no error for ${key} = ${String(value)}`);
    assert.match(of("error").at(-1).message, pattern);
  }
  assert.equal(of("generated").length, 0);
  session.handle({ type: "generate", prompt: "the ", n: 5, temperature: 0 });
  assert.equal(Array.from(of("generated")[0].text).length, 9);
});
