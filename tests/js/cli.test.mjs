// cli.mjs prints what python -m attention_lib.generate prints: the prompt, the continuation and a
// newline; greedy text from the fixture's library tokens; bad arguments: one line, status 2.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
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
    ["--model", "shakespeare", "--prompt", "", "--max-new-tokens", "3"]]) {
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
