// The translator widget labels its heat map with the tokenizer's pieces and explains that
// "␣ marks a space ... so ␣ begins most words": a piece must keep the space its token holds,
// even though a decoded sentence has its surrounding spaces trimmed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel } from "../../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const manifest = JSON.parse(readFileSync(`${root}book/_static/models/translator.json`, "utf8"));
const model = loadModel(manifest, readFileSync(`${root}book/_static/models/translator.bin`));
const tok = model.tokenizer;

test("a word's first piece keeps its space; a later piece and the sentence do not", () => {
  const ids = tok.encode("I bought a blue car.");
  const pieces = ids.map((i) => tok.piece(i));
  assert.equal(pieces[0], " I");
  assert.equal(pieces[1], " bought");
  assert.ok(pieces.some((p) => p.length > 0 && !p.startsWith(" ")), `no later piece in ${JSON.stringify(pieces)}`);
  assert.equal(pieces.join(""), " I bought a blue car.");
  assert.equal(tok.decode(ids), "I bought a blue car.");
});

test("the start, end and padding tokens show as nothing", () => {
  for (const id of [manifest.config.bos_id, manifest.config.eos_id, manifest.config.pad_id]) {
    if (id !== undefined) assert.equal(tok.piece(id), "");
  }
});
