// Inference on the WebAssembly SIMD kernels (transformer.mjs through simd.mjs) against the
// scalar path (setScalar(true)) and the NumPy library (tests/js/fixtures/parity.json):
//   - on both paths, every model's greedy tokens are the library's for the fixture's
//     prompts, and the logits within 1e-3 (parity.test.mjs runs the SIMD path alone);
//   - the two paths' logits and attention weights agree closely, and the same ids;
//   - softmax_rows' polynomial e^x is within 1e-5 (relative) of Math.exp's softmax, for
//     every row length (the tails of 1 to 3 floats) and with -infinity in a row;
//   - grouped-query attention (stories260K: 8 query heads, 4 key heads) agrees with the
//     scalar attend on the same cache;
//   - a growth of a model's kernels memory (which detaches the views of its weights)
//     changes no logit: the weights are re-viewed.
//
//   node --test tests/js/simd-runtime.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";
import { Kernels, kernelsFor, setScalar, withScalar as scalar } from "../../book/_static/runtime/simd.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/parity.json`, "utf8"));
const TOLERANCE = 1e-3;

const loaded = new Map();
function load(name) {
  if (!loaded.has(name)) {
    const manifest = JSON.parse(readFileSync(`${root}book/_static/models/${name}.json`, "utf8"));
    loaded.set(name, loadModel(manifest, readFileSync(`${root}book/_static/models/${name}.bin`)));
  }
  return loaded.get(name);
}
const maxAbsDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);


/** Greedy steps of a decoder-only model: ids, and the logits and attention of each step. */
function greedy(model, ids, n) {
  return [...model.steps(ids, n, { temperature: 0, attention: true })];
}

for (const name of ["shakespeare", "stories260k"]) {
  const ref = fixture.models[name];
  for (const path of ["SIMD", "scalar"]) {
    test(`${name}, ${path} path: the library's greedy tokens, logits within ${TOLERANCE}`, () => {
      const model = load(name);
      let worst = 0;
      const run = () => {
        for (const c of ref.cases.slice(0, 8)) {
          const steps = greedy(model, c.ids, c.new_ids.length);
          assert.deepEqual(steps.map((s) => s.id), c.new_ids, `greedy tokens after ${JSON.stringify(c.prompt)}`);
          worst = Math.max(worst, maxAbsDiff(steps[0].logits, c.logits_first), maxAbsDiff(steps.at(-1).logits, c.logits_last));
        }
      };
      if (path === "scalar") scalar(run);
      else run();
      assert.ok(worst <= TOLERANCE, `max |logit difference| ${worst}`);
    });
  }

  test(`${name}: the SIMD and scalar paths give the same ids, close logits and attention weights`, () => {
    const model = load(name);
    const c = ref.cases[2];
    const fast = greedy(model, c.ids, 24);
    const slow = scalar(() => greedy(model, c.ids, 24));
    assert.deepEqual(fast.map((s) => s.id), slow.map((s) => s.id));
    let logits = 0, weights = 0;
    fast.forEach((s, i) => {
      logits = Math.max(logits, maxAbsDiff(s.logits, slow[i].logits));
      s.attention.forEach((layer, l) => layer.forEach((head, h) => {
        weights = Math.max(weights, maxAbsDiff(head, slow[i].attention[l][h]));
      }));
    });
    assert.ok(logits <= 1e-4, `logits differ by ${logits}`);
    assert.ok(weights <= 1e-5, `attention weights differ by ${weights}`);
    assert.ok(logits > 0, "the two paths gave identical logits: is the SIMD path running at all?");
  });
}

test("translator: greedy and beam translations are the same on both paths", () => {
  const model = load("translator");
  const sentences = fixture.models.translator.cases.slice(0, 6).map((c) => c.prompt);
  for (const beam of [1, 4]) {
    const fast = model.translateMany(sentences, { beam });
    const slow = scalar(() => model.translateMany(sentences, { beam }));
    assert.deepEqual(fast, slow);
  }
});

test("softmax_rows: within 1e-5 relative of Math.exp's softmax, every tail length, -infinity", () => {
  const k = new Kernels();
  for (const S of [1, 2, 3, 4, 5, 6, 7, 8, 9, 31, 100]) {
    const rows = 3;
    const x = Float32Array.from({ length: rows * S }, (_, i) => Math.sin(7.3 * i + S) * 30);
    if (S > 1) x[1] = -Infinity; // a masked score: weight exactly 0
    const [{ at, view }] = k.scratch([rows * S]);
    view.set(x);
    k.exports.softmax_rows(at, rows, S);
    const out = k.f32.subarray(at >> 2, (at >> 2) + rows * S);
    for (let r = 0; r < rows; r++) {
      const row = Array.from(x.subarray(r * S, (r + 1) * S));
      const m = Math.max(...row);
      const e = row.map((v) => Math.exp(v - m));
      const sum = e.reduce((a, b) => a + b);
      row.forEach((_, i) => {
        const want = e[i] / sum, got = out[r * S + i];
        // x - max is rounded to float32 in the kernel (exact in double in JS): at |x - max|
        // ~ 60 that rounding alone moves e^x by up to 60 * 2^-24 ~ 4e-6, relative
        assert.ok(Math.abs(got - want) <= 1e-5 * want + 1e-30, `S ${S}, row ${r}, ${i}: ${got} vs ${want}`);
      });
    }
    if (S > 1) assert.equal(out[1], 0);
  }
});

test("grouped-query attention (8 query heads on 4 key heads): the kernels agree with the scalar loops", () => {
  const model = load("stories260k");
  assert.equal(model.nKv * 2, model.config.n_heads);
  const ids = fixture.models.stories260k.cases[0].ids;
  const fast = model.forwardRows(ids, model.newCache(), true);
  const slow = scalar(() => model.forwardRows(ids, model.newCache(), true));
  assert.ok(maxAbsDiff(fast.logits, slow.logits) <= 1e-4);
  fast.attention.forEach((layer, l) => layer.forEach((head, h) => {
    assert.equal(head.length, ids.length);
    assert.ok(maxAbsDiff(head, slow.attention[l][h]) <= 1e-5, `layer ${l} head ${h}`);
  }));
});

test("a growth of a model's kernels memory (old views detached) changes no logit", () => {
  const model = load("shakespeare");
  const ids = fixture.models.shakespeare.cases[0].ids;
  const before = model.forwardRows(ids, model.newCache()).logits;
  const old = model.m("layers.0.attn.wq");
  const kernels = kernelsFor(old);
  assert.ok(kernels, "the model's matrices do not live in a kernels memory");
  kernels.reserve(kernels.memory.buffer.byteLength + (1 << 20)); // grow by at least 1 MB
  assert.equal(old.length, 0, "the old view should be detached (if not, this test proves nothing)");
  assert.ok(model.m("layers.0.attn.wq").length > 0);
  const after = model.forwardRows(ids, model.newCache()).logits;
  assert.deepEqual(Array.from(after), Array.from(before));
});
