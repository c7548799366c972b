// The runtime's quantized models (book/_static/runtime/quant.mjs) against the NumPy library.
//
// - every tensor the runtime dequantizes is the library's `dequantize` bit for bit (the export
//   records the SHA-256 of the library's float32 weights for each quantized tensor);
// - greedy tokens and logits match the library's quantized model (quantize_model in the
//   served scheme) within 1e-4 (tests/js/fixtures/quant.json, scripts/make_quant_fixture.py);
// - the served files weigh at most half of the float exports, and bad input is refused.
//
//   node --test tests/js/quant.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";
import { SERVED, dequantize, quantizedBytes, servedFile } from "../../book/_static/runtime/quant.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const models = `${root}book/_static/models/`;
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/quant.json`, "utf8"));
const TOLERANCE = 1e-4;

function read(file) {
  const manifest = JSON.parse(readFileSync(`${models}${file}.json`, "utf8"));
  const bin = readFileSync(`${models}${file}.bin`);
  const buffer = bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength);
  return { manifest, buffer };
}

function maxAbsDiff(a, b) {
  assert.equal(a.length, b.length, "logit vectors differ in length");
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test("every model the site shows is served from a quantized file", () => {
  for (const name of ["shakespeare", "stories260k", "translator"]) {
    assert.equal(servedFile(name), `quantized/${name}`);
    assert.ok(fixture.models[name], `no reference for ${name} in tests/js/fixtures/quant.json`);
  }
  assert.equal(servedFile("minilm"), "minilm");
});

test("the page weight of the served models is at most half of the float exports", () => {
  let before = 0;
  let after = 0;
  for (const [name, file] of Object.entries(SERVED)) {
    const float = readFileSync(`${models}${name}.bin`).byteLength;
    const { manifest, buffer } = read(file);
    assert.equal(manifest.quantization.bytes_before, float, `${name}: bytes_before is stale`);
    assert.equal(manifest.quantization.bytes_after, buffer.byteLength);
    console.log(`# ${name}: ${float} -> ${buffer.byteLength} bytes (${manifest.quantization.scheme})`);
    before += float;
    after += buffer.byteLength;
  }
  console.log(`# all: ${before} -> ${after} bytes (${(after / before).toFixed(3)})`);
  assert.ok(after <= before / 2, `${after} bytes served, more than half of ${before}`);
  const shakespeare = read(SERVED.shakespeare).buffer.byteLength;
  assert.ok(shakespeare <= 3.7e6 / 2, `the Shakespeare model weighs ${shakespeare} bytes`);
});

for (const [name, file] of Object.entries(SERVED)) {
  test(`${name}: every dequantized tensor is the library's, bit for bit`, () => {
    const { manifest, buffer } = read(file);
    const view = new DataView(buffer);
    let checked = 0;
    for (const [key, t] of Object.entries(manifest.tensors)) {
      if (!t.dequantized_sha256) continue;
      assert.ok(t.dtype === "q8_0" || t.dtype === "q4_0", `${key}: dtype ${t.dtype}`);
      const data = dequantize(view, key, t);
      const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      assert.equal(createHash("sha256").update(bytes).digest("hex"), t.dequantized_sha256, `${name}: ${key}`);
      checked += 1;
    }
    assert.ok(checked >= 5, `${name}: only ${checked} quantized tensors`);
  });

  test(`${name}: greedy tokens and logits match the library's quantized model`, (t) => {
    const ref = fixture.models[name];
    const { manifest, buffer } = read(file);
    assert.equal(manifest.sha256, ref.weights_sha256,
      `${name}: the fixture was made from other weights; run scripts/make_quant_fixture.py`);
    assert.equal(manifest.quantization.scheme, ref.scheme);
    const model = loadModel(manifest, buffer);
    let worst = 0;
    for (const c of ref.cases) {
      if (model.translate) {
        const out = model.translate(c.prompt, { details: true });
        assert.deepEqual(out.src, c.ids);
        assert.deepEqual(out.ids, c.new_ids, `${name}: greedy translation of ${JSON.stringify(c.prompt)}`);
        const state = model.newState(model.encode(c.ids));
        const logits = [model.config.bos_id, ...c.new_ids].map((id) => model.step(id, state).logits);
        worst = Math.max(worst, maxAbsDiff(logits[0], c.logits_first),
          maxAbsDiff(logits[logits.length - 1], c.logits_last));
        continue;
      }
      const steps = [...model.steps(c.ids, c.new_ids.length, { temperature: 0 })];
      assert.deepEqual(steps.map((s) => s.id), c.new_ids, `${name}: greedy tokens after ${JSON.stringify(c.prompt)}`);
      worst = Math.max(worst, maxAbsDiff(steps[0].logits, c.logits_first),
        maxAbsDiff(steps[steps.length - 1].logits, c.logits_last));
    }
    t.diagnostic(`${name}: max |logit difference| = ${worst.toExponential(2)}`);
    console.log(`# ${name} (${ref.scheme}): max |logit difference| = ${worst.toExponential(2)}`);
    assert.ok(worst <= TOLERANCE, `${name}: max |logit difference| ${worst} > ${TOLERANCE}`);
  });
}

test("q4_0 and q8_0 blocks decode as GGUF lays them out", () => {
  // one q4_0 row of 32 numbers: scale 0.5 (0x3800), byte j = (j % 16) | ((15 - j % 16) << 4)
  const buf = new ArrayBuffer(2 + 16 + 2 + 4);
  const view = new DataView(buf);
  view.setUint16(0, 0x3800, true);
  for (let j = 0; j < 16; j++) view.setUint8(2 + j, j | ((15 - j) << 4));
  const w4 = dequantize(view, "w4", { dtype: "q4_0", group: 32, shape: [1, 32], offset: 0 });
  for (let j = 0; j < 16; j++) {
    assert.equal(w4[j], 0.5 * (j - 8));
    assert.equal(w4[16 + j], 0.5 * (15 - j - 8));
  }
  // one q8_0 row of 4 (one group per row), transposed: runtime shape (4, 1)
  view.setUint16(18, 0x3c00, true); // 1.0
  [-127, -1, 0, 127].forEach((q, j) => view.setInt8(20 + j, q));
  const w8 = dequantize(view, "w8", { dtype: "q8_0", group: 4, shape: [4, 1], offset: 18, transposed: true });
  assert.deepEqual(Array.from(w8), [-127, -1, 0, 127]);
});

test("bad quantized entries are named before anything is read", () => {
  const { manifest, buffer } = read(SERVED.shakespeare);
  const key = Object.keys(manifest.tensors).find((k) => manifest.tensors[k].dtype === "q4_0");
  const tweak = (fields) => {
    const m = structuredClone(manifest);
    Object.assign(m.tensors[key], fields);
    return m;
  };
  assert.throws(() => quantizedBytes(key, { ...manifest.tensors[key], group: 16 }), /q4_0 needs a group size of 32, got 16/);
  assert.throws(() => quantizedBytes(key, { ...manifest.tensors[key], dtype: "q5_1" }), /not a quantized type/);
  assert.throws(() => quantizedBytes(key, { dtype: "q8_0", group: 5, shape: [3, 4], offset: 0 }), /does not divide its rows of 4/);
  assert.throws(() => loadModel(tweak({ dtype: "q3_k" }), buffer), /dtype must be float16, float32, q8_0 or q4_0, got q3_k/);
  // a truncated tensor: the last one claims to run past the end of the file
  const last = Object.entries(manifest.tensors).sort((a, b) => b[1].offset - a[1].offset)[0][0];
  const m = structuredClone(manifest);
  m.tensors[last].offset += 64;
  assert.throws(() => loadModel(m, buffer), new RegExp(`tensor ${last.replace(/\./g, "\\.")} .*lies past the end`));
});
