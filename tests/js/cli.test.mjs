// cli.mjs prints what python -m attention_lib.generate prints: the prompt, the continuation and a
// newline; greedy text from the fixture's library tokens; bad arguments: one line, status 2.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, copyFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const cli = (...args) => spawnSync(process.execPath, [`${root}book/_static/runtime/cli.mjs`, ...args], { encoding: "utf8" });
const fixture = JSON.parse(readFileSync(`${root}tests/js/fixtures/parity.json`, "utf8"));

for (const name of ["shakespeare", "stories260k"]) {
  test(`${name}: greedy output is the prompt and the library's continuation`, () => {
    const model = loadModel(JSON.parse(readFileSync(`${root}book/_static/models/${name}.json`, "utf8")),
      readFileSync(`${root}book/_static/models/${name}.bin`));
    const c = fixture.models[name].cases[1];
    const r = cli("--model", name, "--prompt", c.prompt, "--max-new-tokens", String(c.new_ids.length), "--temperature", "0");
    assert.equal(r.status, 0, r.stderr);
    const all = model.tokenizer.decode([...c.ids, ...c.new_ids]);
    const prompt = model.tokenizer.decode(c.ids);
    assert.equal(r.stdout, c.prompt + all.slice(prompt.length) + "\n");
  });
}

test("bad arguments: a one-line message and status 2", () => {
  for (const args of [["--model", "gpt2", "--max-new-tokens", "3"],
    ["--model", "shakespeare", "--prompt", "ROMEO 🙂", "--max-new-tokens", "3"],
    ["--model", "shakespeare", "--prompt", "A", "--max-new-tokens", "-1"],
    ["--model", "stories260k", "--prompt", "A", "--max-new-tokens", "3", "--top-p", "0"],
    ["--model", "shakespeare", "--prompt", "", "--max-new-tokens", "3"],
    ["--model", "shakespeare", "--prompt", "A", "--max-new-tokens", "3", "--seed", "4294967296"],
    ["--model", "shakespeare", "--prompt", "A", "--max-new-tokens", "3", "--beam", "4"],
    ["--model", "shakespeare", "--prompt", "A", "--max-new-tokens", "200", "--no-crop"],
    ["--model", "translator", "--beam", "100000"],
    ["--model", "translator", "--length-penalty", "400"],
    ["--model", "translator", "--max-new-tokens", "3"],
    ["--model", "stories260k", "--prompt", "Lily", "--max-new-tokens", "3", "--temperature", "1e-320"]]) {
    const r = cli(...args);
    assert.equal(r.status, 2, args.join(" "));
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^node book\/_static\/runtime\/cli\.mjs: error: .+\n$/);
  }
});

test("seeded sampling prints the same text twice", () => {
  const args = ["--model", "stories260k", "--prompt", "Lily", "--max-new-tokens", "20", "--temperature", "0.9", "--seed", "7"];
  assert.equal(cli(...args).stdout, cli(...args).stdout);
});

test("a subnormal temperature is refused naming --temperature (not the least likely token, exit 0)", () => {
  const r = cli("--model", "stories260k", "--prompt", "Lily", "--max-new-tokens", "5", "--temperature", "1e-320");
  assert.equal(r.status, 2);
  assert.match(r.stderr, /argument --temperature: temperature 1e-320 is too small/);
});

test("damaged model files: one line naming the file, status 1, no stack trace", () => {
  const dir = mkdtempSync(`${tmpdir()}/cli-models-`);
  try {
    const src = `${root}book/_static/models/`;
    const bin = readFileSync(`${src}shakespeare.bin`);
    const manifest = readFileSync(`${src}shakespeare.json`, "utf8");
    const damage = {
      truncated: [bin.subarray(0, bin.length - 1000), manifest],
      zeroed: [Buffer.concat([Buffer.alloc(4096), bin.subarray(4096)]), manifest],
      "merge conflict": [bin, manifest.replace("{", "{\n<<<<<<< HEAD\n")],
      "a list": [bin, "[1, 2]"],
    };
    for (const [what, [b, m]] of Object.entries(damage)) {
      writeFileSync(`${dir}/shakespeare.bin`, b);
      writeFileSync(`${dir}/shakespeare.json`, m);
      const r = cli("--model", "shakespeare", "--model-dir", dir, "--prompt", "A", "--max-new-tokens", "3");
      assert.equal(r.status, 1, `${what}: ${r.stderr}`);
      assert.equal(r.stdout, "", what);
      assert.match(r.stderr, /^node book\/_static\/runtime\/cli\.mjs: error: .*shakespeare\.(bin|json).*\n$/, what);
      assert.doesNotMatch(r.stderr, /at .*\.mjs:\d+/, `${what}: a stack trace`);
    }
    copyFileSync(`${src}shakespeare.json`, `${dir}/shakespeare.json`);
    rmSync(`${dir}/shakespeare.bin`);
    const r = cli("--model", "shakespeare", "--model-dir", dir, "--prompt", "A", "--max-new-tokens", "3");
    assert.equal(r.status, 1);
    assert.match(r.stderr, /model shakespeare is missing/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("generation goes on past the context, as the library's (cropped); --no-crop keeps the old error", () => {
  const crop = JSON.parse(readFileSync(`${root}tests/js/fixtures/crop.json`, "utf8")).models.shakespeare.cases[0];
  const n = 300;
  const r = cli("--model", "shakespeare", "--prompt", crop.prompt, "--max-new-tokens", String(n), "--temperature", "0");
  assert.equal(r.status, 0, r.stderr);
  const model = loadModel(JSON.parse(readFileSync(`${root}book/_static/models/shakespeare.json`, "utf8")),
    readFileSync(`${root}book/_static/models/shakespeare.bin`));
  assert.equal(r.stdout, crop.prompt + model.tokenizer.decode(crop.new_ids.slice(0, n)) + "\n");
  const old = cli("--model", "shakespeare", "--prompt", crop.prompt, "--max-new-tokens", String(n), "--no-crop");
  assert.equal(old.status, 2);
  assert.match(old.stderr, /exceed the model's context of 128 tokens/);
});

test("translator: --beam 4 prints the library's beam translations, one line per line, blank lines kept", () => {
  const beam = JSON.parse(readFileSync(`${root}tests/js/fixtures/beam.json`, "utf8"));
  const cases = beam.cases.filter((_, i) => i % 97 === 0);
  const input = cases.map((c) => c.source).join("\n\n") + "\n";
  const r = spawnSync(process.execPath, [`${root}book/_static/runtime/cli.mjs`, "--model", "translator", "--beam", "4"],
    { input, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const model = loadModel(JSON.parse(readFileSync(`${root}book/_static/models/translator.json`, "utf8")),
    readFileSync(`${root}book/_static/models/translator.bin`));
  assert.equal(r.stdout, cases.map((c) => model.tokenizer.decode(c.beam_ids)).join("\n\n") + "\n");
});
