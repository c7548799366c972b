// LoRA in the browser runtime (book/_static/runtime/train-lora.mjs, driven by train.mjs's
// trainStep) against the NumPy library's LoRA (attention_lib.nn.lora).
//
// tests/js/fixtures/lora-train.json (scripts/make_lora_train_fixture.py writes it) holds, for
// two small adapted TinyGPTs (q and v at rank 4; every projection at rank 2, rotary), the
// base weights, each adapter's first A, 3 batches and learning rates, the library's 3
// losses and every A and B after its 3 train_step calls. Here:
//   - from the same weights, A and batches, the JS losses agree within 1e-5 and every A and
//     B within 1e-4 of its largest entry (float32);
//   - a wrong gradient (dB never zeroed between steps; dA from B read as B^T) fails that;
//   - the base stays frozen, B = 0 gives the base model's logits, the count, bad input.
//
//   node --test tests/js/train-lora.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { AdamW, TinyGPT, trainStep } from "../../book/_static/runtime/train.mjs";
import { LoRA, loraParams } from "../../book/_static/runtime/train-lora.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/lora-train.json`, "utf8"));
const LOSS_TOL = 1e-5;
const WEIGHT_TOL = 1e-4;

/** The JS run of a fixture case with a LoRA class (the real one or a mutant): its errors. */
function replay(ref, Adapter = LoRA) {
  const model = new TinyGPT({ ...ref.config, seed: 0 }, { params: ref.params });
  const { rank, alpha, targets } = ref.lora;
  const lora = new Adapter(model, { rank, alpha, targets, init: ref.initial_A });
  const opt = new AdamW(lora.params, { lr: ref.lrs[0], betas: ref.train.betas });
  const { batch: B } = ref.train;
  const T = ref.config.max_len;
  let loss = 0;
  ref.batches.forEach(([x, y], i) => {
    const out = trainStep(model, opt, Int32Array.from(x), Int32Array.from(y), B, T, { clip: ref.train.clip, lr: ref.lrs[i] });
    loss = Math.max(loss, Math.abs(out.loss - ref.losses[i]));
  });
  let weights = 0;
  for (const [name, want] of Object.entries(ref.final)) {
    const got = lora.params[name];
    assert.ok(got && got.length === want.length, `no adapter array ${name}`);
    let diff = 0, size = 0;
    for (let i = 0; i < want.length; i++) {
      diff = Math.max(diff, Math.abs(got[i] - want[i]));
      size = Math.max(size, Math.abs(want[i]));
    }
    weights = Math.max(weights, diff / size);
  }
  return { loss, weights, model, lora };
}

for (const [kind, ref] of Object.entries(fixture.cases)) {
  test(`${kind}: 3 LoRA steps give the library's losses and adapters`, () => {
    const { loss, weights } = replay(ref);
    assert.ok(loss <= LOSS_TOL, `${kind}: the losses differ by ${loss}`);
    assert.ok(weights <= WEIGHT_TOL, `${kind}: A or B differs by ${weights} of its largest entry`);
    // the check has something to check: B left zero, and A moved from its start
    const moved = Object.entries(ref.final).some(([n, v]) => n.endsWith("lora_A") && v.some((x, i) => Math.abs(x - ref.initial_A[n][i]) > 1e-3));
    assert.ok(moved && Object.values(ref.final).every((v) => v.some((x) => x !== 0)), "the reference run barely moves: a weak check");
  });
}

test("a wrong LoRA gradient fails the parity check", () => {
  // (a constant factor on a gradient would not do: Adam divides each step by the gradient's
  // own size, so a dB missing its scaling moves B the same while clipping is idle)
  class StaleB extends LoRA { // dB never zeroed: each step's sum carries the last ones
    gradsFrom(grads) {
      const old = Object.fromEntries(Object.entries(this.grads).map(([n, g]) => [n, Float32Array.from(g)]));
      super.gradsFrom(grads);
      for (const [n, g] of Object.entries(this.grads)) if (n.endsWith("lora_B")) g.forEach((v, i) => (g[i] = v + old[n][i]));
    }
  }
  class RowsOfB extends LoRA { // dA from B read as (n_out, r) instead of (r, n_out)
    gradsFrom(grads) {
      super.gradsFrom(grads);
      const r = this.rank;
      for (const { name, nIn, nOut, B } of this.adapters) {
        const dW = grads[name], dA = this.grads[`${name}.lora_A`];
        for (let i = 0; i < nIn; i++) {
          for (let k = 0; k < r; k++) {
            let acc = 0;
            for (let j = 0; j < nOut; j++) acc += dW[i * nOut + j] * B[j * r + k];
            dA[i * r + k] = this.scaling * acc;
          }
        }
      }
    }
  }
  for (const Mutant of [StaleB, RowsOfB]) {
    const { loss, weights } = replay(fixture.cases.qv, Mutant);
    assert.ok(loss > LOSS_TOL || weights > WEIGHT_TOL, `${Mutant.name} passed the parity check (${loss}, ${weights})`);
  }
});

test("the base stays frozen and B = 0 is the base model", () => {
  const ref = fixture.cases.all;
  const plain = new TinyGPT({ ...ref.config, seed: 0 }, { params: ref.params });
  const [x] = ref.batches[0];
  const T = ref.config.max_len, B = ref.train.batch;
  const before = Float32Array.from(plain.forward(Int32Array.from(x), B, T));
  const { model, lora } = replay(ref);
  const fresh = new TinyGPT({ ...ref.config, seed: 0 }, { params: ref.params });
  new LoRA(fresh, { ...ref.lora, init: ref.initial_A }).install();
  assert.deepEqual(Array.from(fresh.forward(Int32Array.from(x), B, T)), Array.from(before));
  for (const [name, values] of Object.entries(ref.params)) {
    const adapted = lora.adapters.find((a) => a.name === name);
    const now = adapted ? adapted.base : model.params[name];
    assert.deepEqual(Array.from(now), Array.from(Float32Array.from(values)), `${name} changed`);
  }
  // the frozen weights get no gradient; the adapted ones do (what dA and dB come from)
  assert.ok(model.grads["blocks.0.ffn.fc1.W"].some((g) => g !== 0), "fc1 is adapted in this case: it needs its dW");
  const qv = replay(fixture.cases.qv).model;
  assert.ok(qv.grads["blocks.0.ffn.fc1.W"].every((g) => g === 0), "a frozen weight was given a gradient");
  assert.ok(qv.grads["blocks.0.attn.W_Q"].some((g) => g !== 0));
});

test("the trainable count is r (n_in + n_out) per adapted weight", () => {
  const config = { n_vocab: 65, d_model: 192, n_heads: 4, n_layers: 4, d_ff: 768, max_len: 16, seed: 0 };
  const model = new TinyGPT(config);
  const lora = new LoRA(model, { rank: 8 });
  assert.equal(lora.count, 4 * 2 * 8 * (192 + 192));
  assert.equal(loraParams(config, 8), lora.count);
  assert.equal(loraParams(config, 2, ["q", "k", "v", "o", "fc1", "fc2"]), 4 * 2 * (4 * 384 + 2 * 960));
});

test("bad LoRA settings: one clear error, the model left as it was", () => {
  const config = { n_vocab: 7, d_model: 8, n_heads: 2, n_layers: 1, d_ff: 16, max_len: 4, seed: 0 };
  const cases = [
    [{ rank: 0 }, /rank must be an integer in \[1, 8\].*got 0/],
    [{ rank: 9 }, /rank must be an integer in \[1, 8\].*got 9/],
    [{ rank: 2.5 }, /rank must be an integer/],
    [{ alpha: NaN }, /alpha must be a positive finite number, got NaN/],
    [{ alpha: 0 }, /alpha must be a positive/],
    [{ targets: ["q", "gate"] }, /unknown target "gate": the model has q, k, v, o, fc1, fc2/],
    [{ targets: [] }, /targets must name at least one of q, k, v, o, fc1, fc2/],
    [{ targets: ["q", "q"] }, /names a projection twice/],
    [{ init: { "blocks.0.attn.W_Q.lora_A": [1, 2] } }, /init\.blocks\.0\.attn\.W_Q\.lora_A must hold 64 numbers/],
  ];
  for (const [options, pattern] of cases) {
    const model = new TinyGPT(config);
    assert.throws(() => new LoRA(model, options), pattern);
    assert.equal(model.lora, null);
    assert.equal(model.frozen, null);
  }
  const model = new TinyGPT(config);
  new LoRA(model, { rank: 2 });
  assert.throws(() => new LoRA(model, { rank: 2 }), /has LoRA adapters already/);
});
