// The runtime's defences: it checks the files it loads (size, SHA-256, tensor shapes against
// the configuration, finite values) before building a model, its sampler never draws a token
// of probability zero, and a temperature that overflows the logits is refused by name.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadModel, pickToken, distribution, sha256Hex, makeRng } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const files = (name) => ({
  manifest: JSON.parse(readFileSync(`${root}book/_static/models/${name}.json`, "utf8")),
  bin: new Uint8Array(readFileSync(`${root}book/_static/models/${name}.bin`)),
});
const digest = (bytes) => createHash("sha256").update(bytes).digest("hex");
/** A copy of a model's files whose manifest is made to agree with changed weights. */
function altered(name, change) {
  const { manifest, bin } = files(name);
  const m = structuredClone(manifest);
  const b = change(m, bin.slice()) ?? bin.slice();
  m.bytes = b.byteLength;
  m.sha256 = digest(b);
  return { manifest: m, bin: b };
}

test("sha256Hex is SHA-256 (node's crypto agrees, around every block boundary)", () => {
  for (const n of [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 65537]) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 31 + 7) & 255);
    assert.equal(sha256Hex(bytes), digest(bytes), `${n} bytes`);
  }
});

test("weights whose bytes differ from the manifest's sha256 are refused (same size, zeroed)", () => {
  const { manifest, bin } = files("translator");
  const zeroed = bin.slice();
  zeroed.fill(0, 0, 4096);
  assert.throws(() => loadModel(manifest, zeroed), /sha256 is .* the manifest says .*damaged or belongs to another model/);
  const noHash = { ...manifest };
  delete noHash.sha256;
  assert.throws(() => loadModel(noHash, bin), /no sha256/);
});

test("a truncated weights file is refused with a message, not a crash", () => {
  const { manifest, bin } = files("shakespeare");
  assert.throws(() => loadModel(manifest, bin.slice(0, bin.length - 100)), /the weights are \d+ bytes but the manifest says \d+: the file is truncated/);
  // and without the size in the manifest, the tensors past the end are named
  const m = altered("shakespeare", (mm, b) => { delete mm.bytes; return b.slice(0, b.length - 100); });
  delete m.manifest.bytes;
  assert.throws(() => loadModel(m.manifest, m.bin), /tensor head\.\w+ \(shape \[[\d,]+\]\) lies past the end/);
});

test("NaN or infinite weights are refused, naming the tensor", () => {
  const { manifest, bin } = altered("stories260k", (m, b) => {
    const t = m.tensors["layers.2.ffn.w2"];
    new DataView(b.buffer).setFloat32(t.offset + 40, NaN, true);
    return b;
  });
  assert.throws(() => loadModel(manifest, bin), /tensor layers\.2\.ffn\.w2 holds 1 values that are NaN or infinite/);
  const half = altered("shakespeare", (m, b) => {
    new DataView(b.buffer).setUint16(m.tensors["pos_emb"].offset + 6, 0x7c00, true); // +inf in float16
    return b;
  });
  assert.throws(() => loadModel(half.manifest, half.bin), /tensor pos_emb holds 1 values/);
});

test("tensor shapes are compared with the configuration before the model is built", () => {
  const cases = [
    [(m) => { m.config.d_ff = 700; }, /tensor layers\.0\.ffn\.w1 has shape \[192,768\], but the configuration implies \[192,700\]/],
    [(m) => { m.config.n_layers = 5; }, /the weights have no tensor layers\.4\.\S+ \(shape/],
    [(m) => { delete m.tensors["layers.3.attn.wo"]; }, /no tensor layers\.3\.attn\.wo/],
    [(m) => { m.tensors["head.weight"].shape = [65, 192]; }, /tensor head\.weight has shape \[65,192\], but the configuration implies \[192,65\]/],
    [(m) => { m.config.n_heads = 5; }, /d_model \(192\) must be a multiple of config\.n_heads \(5\)/],
    [(m) => { m.config.max_len = 0; }, /config\.max_len must be an integer >= 1/],
    // a claimed shape far larger than the file is refused before anything is allocated
    [(m) => { m.tensors.tok_emb.shape = [4e9, 192]; }, /tensor tok_emb \(shape \[4000000000,192\]\) lies past the end/],
    [(m) => { m.tensors.tok_emb.shape = [65, -1]; }, /shape must be positive integers/],
    [(m) => { m.tensors.tok_emb.offset = -2; }, /offset must be an integer >= 0/],
  ];
  for (const [change, message] of cases) {
    const { manifest, bin } = altered("shakespeare", (m) => { change(m); });
    assert.throws(() => loadModel(manifest, bin), message);
  }
  const kv = altered("stories260k", (m) => { m.config.n_kv_heads = 8; });
  assert.throws(() => loadModel(kv.manifest, kv.bin), /tensor layers\.0\.attn\.wk has shape \[64,32\], but the configuration implies \[64,64\]/);
});

test("a manifest that is not a model description is refused by name", () => {
  const { bin } = files("shakespeare");
  assert.throws(() => loadModel([], bin), /manifest must be the parsed JSON object/);
  assert.throws(() => loadModel({ config: {}, tokenizer: {}, tensors: [] }, bin), /manifest\.tensors must be an object/);
});

test("the sampler never draws a token of probability zero, whatever the uniform draw", () => {
  const draws = [0, 1e-300, 0.5, 0.9999999999999999, 1 - 2 ** -53, 1]; // 1: a generator out of range
  const rng = makeRng(5);
  for (let trial = 0; trial < 300; trial++) {
    const V = 50;
    const logits = Float32Array.from({ length: V }, () => (rng() < 0.3 ? -1e4 : 30 * rng()));
    const opts = { temperature: [0.05, 0.5, 1, 3][trial % 4], topK: [0, 5, 20][trial % 3], topP: [1, 0.9, 0.5][trial % 3] };
    const { ids, probs } = distribution(logits, opts);
    const allowed = new Map(ids.map((id, r) => [id, probs[r]]));
    for (const u of draws) {
      const id = pickToken(logits, opts, () => u);
      assert.ok(allowed.has(id), `trial ${trial}, u = ${u}: token ${id} is outside the kept set [${ids}]`);
      assert.ok(allowed.get(id) > 0, `trial ${trial}, u = ${u}: token ${id} has probability 0`);
    }
  }
  // the case: 50 tokens, top-5 [7, 20, 27, 42, 46], a draw of 0.9999999999999999
  const logits = new Float32Array(50).fill(-5);
  for (const [i, id] of [7, 20, 27, 42, 46].entries()) logits[id] = 10 - i;
  const id = pickToken(logits, { temperature: 1, topK: 5 }, () => 0.9999999999999999);
  assert.ok([7, 20, 27, 42, 46].includes(id), `drew ${id}`);
});

test("a subnormal temperature is refused by name, as the library refuses it", () => {
  const logits = Float32Array.from([1, 2, 3, -1]);
  for (const temperature of [1e-320, 5e-324, 1e-310]) {
    assert.throws(() => pickToken(logits, { temperature }, () => 0.5), /temperature .* is too small: logits \/ temperature is not finite/);
  }
  assert.equal(pickToken(logits, { temperature: 1e-30 }, () => 0.99), 2, "a tiny normal temperature is greedy in effect");
  const { manifest, bin } = files("stories260k");
  const model = loadModel(manifest, bin);
  assert.throws(() => model.generate(model.tokenizer.encode("Lily"), 3, { temperature: 1e-320 }), /temperature/);
});

test("text decoded token by token is the text decoded at once", () => {
  for (const name of ["shakespeare", "stories260k"]) {
    const { manifest, bin } = files(name);
    const model = loadModel(manifest, bin);
    const prompt = model.tokenizer.encode(name === "shakespeare" ? "ROMEO:" : "Once upon a time");
    const ids = [...prompt, ...model.generate(prompt, 150, { temperature: 1.2, seed: 9 })];
    const stream = model.tokenizer.streamDecoder();
    let text = ids.map((id) => stream.push(id)).join("") + stream.flush();
    assert.equal(text, model.tokenizer.decode(ids), name);
    // bytes of one character split across tokens come out once the character is whole
    if (name === "stories260k") {
      const tok = model.tokenizer;
      const bytes = [...new TextEncoder().encode("é")].map((b) => tok.tokens.indexOf(`<0x${b.toString(16).toUpperCase()}>`));
      const s = tok.streamDecoder();
      text = [tok.bosId, ...bytes].map((id) => s.push(id));
      assert.deepEqual(text, ["", "", "é"]);
    }
  }
});
