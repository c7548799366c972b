// The sliding window with attention sinks (window.mjs) against the library's rolling KV cache:
// greedy ids and logits within 1e-4, far past the window and the 128-character training context
// (tests/js/fixtures/window.json, scripts/make_window_fixture.py), memory flat, bad input refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadModel, argmax } from "../../book/_static/runtime/transformer.mjs";
import {
  RollingKVCache, rollingCache, forwardRolling, streamSteps, cacheBytes,
} from "../../book/_static/runtime/window.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/window.json`, "utf8"));
const TOLERANCE = 1e-4;
const manifest = JSON.parse(readFileSync(`${root}book/_static/models/shakespeare_window.json`, "utf8"));
const bin = readFileSync(`${root}book/_static/models/shakespeare_window.bin`);
const model = loadModel(manifest, bin);

test("the fixture was made from the exported weights", () => {
  assert.equal(createHash("sha256").update(bin).digest("hex"), manifest.sha256);
  assert.equal(fixture.weights_sha256, manifest.sha256,
    "the fixture was made from other weights: run scripts/make_window_fixture.py");
  assert.ok(fixture.cases.some((c) => c.window !== null && c.sinks > 0));
  assert.ok(fixture.cases.some((c) => c.window !== null && c.sinks === 0));
  assert.ok(fixture.cases.some((c) => c.window === null));
});

for (const c of fixture.cases) {
  const label = c.window === null ? "full attention" : `window ${c.window}, ${c.sinks} sinks`;
  test(`${label}: every logit within ${TOLERANCE} of the library's, ${c.new_ids.length} tokens`, (t) => {
    assert.deepEqual(model.tokenizer.encode(c.prompt), c.ids);
    assert.ok(c.ids.length + c.new_ids.length > 2 * model.maxLen, "the case does not go far past the context");
    const cache = rollingCache(model, c.window, c.sinks);
    const chunk = c.window ?? c.ids.length;
    let out;
    for (let i = 0; i < c.ids.length; i += chunk) out = forwardRolling(model, c.ids.slice(i, i + chunk), cache);
    let worst = 0;
    let compared = 0;
    const rows = new Set();
    for (let n = 0; n < c.new_ids.length; n++) {
      // teacher-forced on the library's ids, so a failure names the first step that differs
      assert.equal(argmax(out.logits), c.new_ids[n], `greedy token ${n} differs`);
      const ref = c.logits[String(n)];
      if (ref) {
        for (let i = 0; i < ref.length; i++) worst = Math.max(worst, Math.abs(out.logits[i] - ref[i]));
        compared += 1;
      }
      if (n + 1 < c.new_ids.length) out = forwardRolling(model, [c.new_ids[n]], cache);
      if (n > c.ids.length + 2 * (c.window ?? 0)) rows.add(cache[0].length);
    }
    assert.ok(compared >= 10, `only ${compared} steps compared`);
    assert.ok(worst <= TOLERANCE, `largest logit difference ${worst}`);
    assert.equal(cache[0].length, c.rows, "rows kept in the cache at the end");
    if (c.window !== null) {
      // constant memory: once full, the cache holds sinks + window - 1 rows between steps
      assert.deepEqual([...rows], [c.sinks + c.window - 1]);
      assert.equal(cacheBytes(cache), model.config.n_layers * 2 * (c.sinks + c.window - 1) * model.config.d_model * 4);
    }
    t.diagnostic(`${label}: ${compared} steps compared, largest difference ${worst.toExponential(2)}`);
  });
}

test("streamSteps gives the library's greedy ids and reports flat memory", () => {
  const c = fixture.cases[0];
  const steps = [...streamSteps(model, c.ids, c.new_ids.length, { window: c.window, sinks: c.sinks, temperature: 0 })];
  assert.deepEqual(steps.map((s) => s.id), c.new_ids);
  const late = new Set(steps.slice(200).map((s) => s.bytes));
  assert.equal(late.size, 1, "the memory in use changes after the cache is full");
  assert.equal(steps[steps.length - 1].position, c.ids.length + c.new_ids.length - 2);
  // full attention: the cache grows by one row a token
  const full = [...streamSteps(model, c.ids, 200, { window: null, temperature: 0 })];
  assert.equal(full[199].rows - full[99].rows, 100);
});

test("without end: maxNewTokens = Infinity writes until the caller stops reading", () => {
  const ids = model.tokenizer.encode("ROMEO:\n");
  let n = 0;
  let last;
  for (const s of streamSteps(model, ids, Infinity, { window: 16, sinks: 2, temperature: 0.8, seed: 3 })) {
    last = s;
    if (++n === 500) break;
  }
  assert.equal(n, 500);
  assert.equal(last.rows, 2 + 16 - 1);
  assert.throws(() => [...streamSteps(model, ids, NaN, { window: 8 })], /maxNewTokens must be an integer >= 0, got NaN/);
});

test("sampling is seeded: the same seed gives the same text", () => {
  const ids = model.tokenizer.encode("ROMEO:\n");
  const run = (seed) => [...streamSteps(model, ids, 150, { window: 32, sinks: 4, temperature: 0.8, seed })].map((s) => s.id);
  assert.deepEqual(run(7), run(7));
  assert.notDeepEqual(run(7), run(8));
});

test("the attention weights of the last row cover the cache and sum to 1; sinks stay in view", () => {
  const cache = rollingCache(model, 8, 2);
  const ids = model.tokenizer.encode("To be, or not to be, that is the question:");
  let out;
  for (const id of ids) out = forwardRolling(model, [id], cache, true);
  const w = out.attention[0][0];
  assert.equal(w.length, 2 + 8); // 2 sinks and the window, the query itself included
  assert.ok(Math.abs(w.reduce((a, b) => a + b, 0) - 1) < 1e-5);
  assert.ok(w[0] > 0 && w[1] > 0);
});

test("bad input is refused with a message naming the argument", () => {
  assert.throws(() => new RollingKVCache(0, 0, 4), /window must be an integer >= 1, got 0/);
  assert.throws(() => new RollingKVCache(4, -1, 4), /sinks must be an integer >= 0, got -1/);
  assert.throws(() => new RollingKVCache(null, 2, 4), /sinks = 2 needs a window/);
  assert.throws(() => new RollingKVCache(2.5, 0, 4), /window must be an integer/);
  assert.throws(() => rollingCache(model, 8, 1.5), /sinks must be an integer/);
  const cache = rollingCache(model, 8, 1);
  assert.throws(() => forwardRolling(model, [], cache), /at least one token/);
  assert.throws(() => forwardRolling(model, [65], cache), /token must be an integer id in \[0, 65\), got 65/);
  assert.throws(() => forwardRolling(model, [1], []), /cache must be rollingCache/);
  assert.throws(() => [...streamSteps(model, [], 3, { window: 8 })], /at least one token/);
  assert.throws(() => [...streamSteps(model, [1], -1, { window: 8 })], /maxNewTokens must be an integer >= 0/);
  assert.throws(() => [...streamSteps(model, [1], 3, { window: 8, temperature: -1 })], /temperature must be/);
  const learned = loadModel(
    JSON.parse(readFileSync(`${root}book/_static/models/shakespeare.json`, "utf8")),
    readFileSync(`${root}book/_static/models/shakespeare.bin`));
  assert.throws(() => rollingCache(learned, 8, 1), /positions "learned" .* need rotary or no positions|rolling cache needs rotary/);
});
