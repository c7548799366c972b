#!/usr/bin/env node
// The browser runtime on the command line, printing what `python -m attention_lib.generate` prints:
//
//   node book/_static/runtime/cli.mjs --model shakespeare --prompt "ROMEO:" --max-new-tokens 200 \
//       [--temperature 0.8] [--top-k 20] [--top-p 0.9] [--seed 1]
//   node book/_static/runtime/cli.mjs --model translator [--beam 4] [FILE]   # one French line per English line
//
// The prompt, then the continuation, then a newline. --temperature 0 is greedy (the same tokens
// as the Python command); sampling uses the runtime's own seeded generator, so a seed gives
// the same text every time here, but not the text NumPy's generator gives. Past the context
// the window slides as the Python command's does: each further token is predicted from the
// last max_len - 1 tokens. Bad arguments: a one-line message and exit status 2.
import { readFileSync, writeSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadModel } from "./transformer.mjs";

const PROG = "node book/_static/runtime/cli.mjs";
const MODELS = ["shakespeare", "stories260k", "translator"];

function fail(message, status = 2) {
  process.stderr.write(`${PROG}: error: ${message}\n`);
  process.exit(status);
}

function parseArgs(argv) {
  const args = { temperature: 1, topK: 0, topP: 1, seed: undefined, beam: 1, prompt: "", files: [] };
  const number = (flag, text, check, what) => {
    const v = Number(text);
    if (text === undefined || text === "" || !Number.isFinite(v) || !check(v)) {
      fail(`argument ${flag}: must be ${what}, got ${JSON.stringify(text ?? "")}`);
    }
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.startsWith("--") && a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const value = () => (inline !== undefined ? inline : argv[++i]);
    switch (flag) {
      case "--model": args.model = value(); break;
      case "--prompt": args.prompt = value() ?? fail("argument --prompt: expected one argument"); break;
      case "--max-new-tokens": args.maxNew = number(flag, value(), (v) => Number.isInteger(v) && v >= 0, "an integer >= 0 (0, 1, 2, ...)"); break;
      case "--temperature": args.temperature = number(flag, value(), (v) => v >= 0, ">= 0 (0 is greedy, 1 the model's own distribution)"); break;
      case "--top-k": args.topK = number(flag, value(), (v) => Number.isInteger(v) && v >= 1, "a positive integer (1, 2, ...)"); break;
      case "--top-p": args.topP = number(flag, value(), (v) => v > 0 && v <= 1, "a probability in (0, 1] (1 keeps every token)"); break;
      case "--seed": args.seed = number(flag, value(), (v) => Number.isInteger(v) && v >= 0, "an integer >= 0 (0, 1, 2, ...)"); break;
      case "--beam": args.beam = number(flag, value(), (v) => Number.isInteger(v) && v >= 1, "a positive integer (1, 2, ...)"); break;
      case "-h": case "--help":
        process.stdout.write(`usage: ${PROG} --model {${MODELS.join(",")}} --prompt TEXT --max-new-tokens N ` +
          "[--temperature T] [--top-k K] [--top-p P] [--seed S]\n" +
          `       ${PROG} --model translator [--beam N] [FILE]\n`);
        process.exit(0);
        break;
      default:
        if (a.startsWith("--") ) fail(`unrecognized arguments: ${a}`);
        args.files.push(a);
    }
  }
  if (!MODELS.includes(args.model)) {
    fail(`argument --model: invalid choice: ${JSON.stringify(args.model ?? "")} (choose from ${MODELS.join(", ")})`);
  }
  if (args.model !== "translator") {
    if (args.maxNew === undefined) fail("the following arguments are required: --max-new-tokens");
    if (args.files.length) fail(`unrecognized arguments: ${args.files.join(" ")}`);
  }
  return args;
}

function load(name) {
  const dir = fileURLToPath(new URL("../models/", import.meta.url));
  let manifest;
  let weights;
  try {
    manifest = JSON.parse(readFileSync(`${dir}${name}.json`, "utf8"));
    weights = readFileSync(`${dir}${name}.bin`);
  } catch (err) {
    fail(`model ${name} is missing from ${dir} (${err.code || err.message}): run scripts/export_models.py`, 1);
  }
  return loadModel(manifest, weights);
}

/** Write to stdout; a closed pipe (| head) ends the program quietly. */
function write(text) {
  try {
    const bytes = Buffer.from(text, "utf8");
    for (let done = 0; done < bytes.length;) {
      try {
        done += writeSync(1, bytes, done);
      } catch (err) {
        if (err.code !== "EAGAIN") throw err; // a non-blocking pipe that is full: try again
      }
    }
  } catch (err) {
    if (err.code === "EPIPE") process.exit(0);
    throw err;
  }
}

function generate(args) {
  const model = load(args.model);
  if (args.model === "shakespeare" && !args.prompt) {
    fail("--prompt is empty: the shakespeare model needs at least one character to start from, e.g. --prompt 'ROMEO:'");
  }
  let promptIds;
  try {
    promptIds = model.tokenizer.encode(args.prompt);
  } catch (err) {
    fail(`--prompt: ${err.message}`);
  }
  if (promptIds.length === 0) fail("--prompt encodes to no tokens: give some text to continue");
  const limit = model.maxLen - 1;
  if (promptIds.length > limit) {
    process.stderr.write(`${PROG}: note: the prompt is ${promptIds.length} tokens long; the model reads ` +
      `at most ${model.maxLen}, so it continues from the last ${limit}\n`);
  }
  const seed = args.seed ?? Math.floor(Math.random() * 2 ** 31);
  const opts = { temperature: args.temperature, topK: args.topK, topP: args.topP, seed };
  const ids = [...promptIds];
  let soFar = model.tokenizer.decode(ids);
  write(args.prompt);
  let left = args.maxNew;
  let round = 0;
  while (left > 0) {
    // One KV cache while the context has room; then slide, one token at a time.
    const context = ids.length < limit ? ids : ids.slice(-limit);
    const n = Math.min(left, model.maxLen - context.length);
    const fresh = model.generate(context, n, { ...opts, seed: seed + round });
    round += 1;
    left -= n;
    for (const id of fresh) {
      ids.push(id);
      const text = model.tokenizer.decode(ids);
      if (text.startsWith(soFar)) {
        write(text.slice(soFar.length));
        soFar = text;
      }
    }
  }
  write("\n");
}

function translate(args) {
  const model = load("translator");
  if (args.files.length > 1) fail(`unrecognized arguments: ${args.files.slice(1).join(" ")}`);
  const file = args.files[0] ?? "-";
  let bytes;
  try {
    bytes = readFileSync(file === "-" ? 0 : file);
  } catch (err) {
    fail(`can't open '${file}': ${err.code === "ENOENT" ? "No such file or directory" : err.message}`);
  }
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    fail(`${file === "-" ? "standard input" : file} is not UTF-8 text`);
  }
  if (text.startsWith("\ufeff")) text = text.slice(1);
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  lines.forEach((line, i) => {
    const english = line.replace(/\r$/, "");
    if (english.trim() === "") return write("\n");
    try {
      write(model.translate(english, { beam: args.beam }) + "\n");
    } catch (err) {
      fail(`line ${i + 1}: ${err.message}`);
    }
  });
}

const args = parseArgs(process.argv.slice(2));
if (args.model === "translator") translate(args);
else generate(args);
