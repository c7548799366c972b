#!/usr/bin/env node
// The browser runtime on the command line, printing what `python -m attention_lib.generate` prints:
//
//   node book/_static/runtime/cli.mjs --model shakespeare --prompt "ROMEO:" --max-new-tokens 200 \
//       [--temperature 0.8] [--top-k 20] [--top-p 0.9] [--seed 1] [--no-crop]
//   node book/_static/runtime/cli.mjs --model translator [--beam 4] [--length-penalty 0.6] [FILE]
//       # one French line per English line
//
// The prompt, then the continuation, then a newline. --temperature 0 is greedy (the same tokens
// as the Python command); sampling uses the runtime's own seeded generator, so a seed gives
// the same text every time here, but not the text NumPy's generator gives.
//
// Past the context (max_len tokens: 128 characters for shakespeare, 512 tokens for
// stories260k) generation goes on, cropped as the library crops it: a longer prompt is cut to
// its last max_len tokens, each new token is fed to the KV cache while it has room, and when
// it is full the last max_len / 2 tokens are encoded afresh (half a window, once every
// max_len / 2 tokens), so every token is predicted from between max_len / 2 and max_len
// tokens. --no-crop refuses, as before, a prompt and --max-new-tokens that do not fit.
//
// Bad arguments: a one-line message and exit status 2. A missing or damaged model file
// (wrong size or sha256, a tensor of the wrong shape, NaN weights): one line, status 1.
// Piped into `head` it stops quietly.
import { readFileSync, writeSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadModel, MAX_BEAM } from "./transformer.mjs";

const PROG = "node book/_static/runtime/cli.mjs";
const MODELS = ["shakespeare", "stories260k", "translator"];

function fail(message, status = 2) {
  process.stderr.write(`${PROG}: error: ${message.split("\n")[0]}\n`);
  process.exit(status);
}

function parseArgs(argv) {
  const args = { temperature: 1, topK: 0, topP: 1, seed: undefined, prompt: "", files: [], given: new Set(), crop: true };
  const number = (flag, text, check, what) => {
    const v = Number(text);
    if (text === undefined || text.trim() === "" || !Number.isFinite(v) || !check(v)) {
      fail(`argument ${flag}: must be ${what}, got ${JSON.stringify(text ?? "")}`);
    }
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.startsWith("--") && a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const value = () => (inline !== undefined ? inline : argv[++i]);
    if (flag.startsWith("--")) args.given.add(flag);
    switch (flag) {
      case "--model": args.model = value(); break;
      case "--model-dir": args.modelDir = value() ?? fail("argument --model-dir: expected one argument"); break;
      case "--prompt": args.prompt = value() ?? fail("argument --prompt: expected one argument"); break;
      case "--max-new-tokens": args.maxNew = number(flag, value(), (v) => Number.isInteger(v) && v >= 0 && v <= 1e7, "an integer from 0 to 10000000"); break;
      case "--temperature": args.temperature = number(flag, value(), (v) => v >= 0, ">= 0 (0 is greedy, 1 the model's own distribution)"); break;
      case "--top-k": args.topK = number(flag, value(), (v) => Number.isInteger(v) && v >= 1, "a positive integer (1, 2, ...)"); break;
      case "--top-p": args.topP = number(flag, value(), (v) => v > 0 && v <= 1, "a probability in (0, 1] (1 keeps every token)"); break;
      case "--seed": args.seed = number(flag, value(), (v) => Number.isInteger(v) && v >= 0 && v < 2 ** 32, "an integer from 0 to 4294967295"); break;
      case "--no-crop": args.crop = false; break;
      case "--beam": args.beam = number(flag, value(), (v) => Number.isInteger(v) && v >= 1 && v <= MAX_BEAM, `an integer from 1 to ${MAX_BEAM}`); break;
      case "--length-penalty": args.lengthPenalty = number(flag, value(), (v) => v >= 0 && v <= 10, "a number from 0 to 10 (0: no penalty)"); break;
      case "-h": case "--help":
        process.stdout.write(`usage: ${PROG} --model {${MODELS.filter((m) => m !== "translator").join(",")}} --prompt TEXT --max-new-tokens N ` +
          "[--temperature T] [--top-k K] [--top-p P] [--seed S] [--no-crop]\n" +
          `       ${PROG} --model translator [--beam N] [--length-penalty A] [FILE]\n`);
        process.exit(0);
        break;
      default:
        if (a.startsWith("-") && a !== "-") fail(`unrecognized arguments: ${a}`);
        args.files.push(a);
    }
  }
  if (!MODELS.includes(args.model)) {
    fail(`argument --model: invalid choice: ${JSON.stringify(args.model ?? "")} (choose from ${MODELS.join(", ")})`);
  }
  const wrong = (flags, what) => {
    const used = flags.filter((f) => args.given.has(f));
    if (used.length) fail(`argument ${used[0]}: not allowed with --model ${args.model} (${what})`);
  };
  if (args.model === "translator") {
    wrong(["--prompt", "--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed", "--no-crop"],
      "the translator reads English lines from FILE or standard input");
  } else {
    wrong(["--beam", "--length-penalty"], "beam search is for the translator");
    if (args.maxNew === undefined) fail("the following arguments are required: --max-new-tokens");
    if (args.files.length) fail(`unrecognized arguments: ${args.files.join(" ")}`);
  }
  return args;
}

function load(name, folder) {
  const dir = folder ? `${folder.replace(/\/$/, "")}/` : fileURLToPath(new URL("../models/", import.meta.url));
  let manifest;
  let weights;
  try {
    weights = readFileSync(`${dir}${name}.bin`);
    manifest = readFileSync(`${dir}${name}.json`, "utf8");
  } catch (err) {
    fail(`model ${name} is missing from ${dir} (${err.code || err.message}): run scripts/export_models.py`, 1);
  }
  try {
    manifest = JSON.parse(manifest);
  } catch (err) {
    fail(`${dir}${name}.json is not valid JSON (${err.message}): run scripts/export_models.py`, 1);
  }
  try {
    return loadModel(manifest, weights, { digest: createHash("sha256").update(weights).digest("hex") });
  } catch (err) {
    fail(`${dir}${name}.bin: ${err.message}`, 1);
  }
  return null;
}

/** Write to stdout; a closed pipe (| head) ends the program quietly, a full disk with one line. */
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
    fail(`cannot write the output (${err.code || err.message})`, 1);
  }
}

function generate(args) {
  const model = load(args.model, args.modelDir);
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
  const W = model.maxLen;
  if (!args.crop && promptIds.length + args.maxNew > W) {
    fail(`the prompt (${promptIds.length} tokens) and --max-new-tokens (${args.maxNew}) exceed the model's ` +
      `context of ${W} tokens; leave out --no-crop to generate past it`);
  }
  if (promptIds.length > W) {
    process.stderr.write(`${PROG}: note: the prompt is ${promptIds.length} tokens long; the model reads ` +
      `at most ${W}, so it continues from the last ${W}\n`);
  }
  const seed = args.seed ?? Math.floor(Math.random() * 2 ** 31);
  const opts = { temperature: args.temperature, topK: args.topK, topP: args.topP, seed, crop: args.crop };
  const text = model.tokenizer.streamDecoder();
  for (const id of promptIds) text.push(id); // what the prompt's tokens print is printed as typed
  const steps = model.steps(promptIds, args.maxNew, opts);
  const next = () => {
    try {
      return steps.next();
    } catch (err) {
      if (/temperature/.test(err.message)) fail(`argument --temperature: ${err.message}`);
      throw err;
    }
  };
  let step = next(); // the first token is chosen before anything is printed
  write(args.prompt);
  for (; !step.done; step = next()) write(text.push(step.value.id));
  write(text.flush() + "\n");
}

function translate(args) {
  const model = load("translator", args.modelDir);
  if (args.files.length > 1) fail(`unrecognized arguments: ${args.files.slice(1).join(" ")}`);
  const file = args.files[0] ?? "-";
  let bytes;
  try {
    bytes = readFileSync(file === "-" ? 0 : file);
  } catch (err) {
    fail(`can't open '${file}': ${err.code === "ENOENT" ? "No such file or directory" : err.code || err.message}`);
  }
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    fail(`${file === "-" ? "standard input" : file} is not UTF-8 text`);
  }
  if (text.startsWith("\ufeff")) text = text.slice(1);
  const lines = text.split("\n").map((line) => line.replace(/\r$/, ""));
  if (lines[lines.length - 1] === "") lines.pop();
  const opts = { beam: args.beam ?? 1, lengthPenalty: args.lengthPenalty ?? 0.6 };
  // 32 lines at a time: each decoded as if alone, the decoder steps of all of them together
  for (let at = 0; at < lines.length; at += 32) {
    const part = lines.slice(at, at + 32);
    let french;
    try {
      french = model.translateMany(part.map((line) => (line.trim() === "" ? "" : line)), opts);
    } catch (err) {
      fail(`lines ${at + 1}-${at + part.length}: ${err.message}`);
    }
    write(french.map((f) => `${f}\n`).join(""));
  }
}

const args = parseArgs(process.argv.slice(2));
if (args.model === "translator") translate(args);
else generate(args);
