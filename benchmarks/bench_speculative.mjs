// Speculative decoding in the runtime (book/_static/runtime/speculative.mjs, issue 42), in node:
// for each draft (prompt lookup; the library's n-gram table distilled from the target,
// data/checkpoints/serving/ngram_draft.npz) and k = 1..8, greedy, on the Shakespeare model the
// site serves: the share of drafts kept, tokens per pass of the target, and the speed-up in wall
// and CPU time against plain greedy decoding (model.generate) of the same prompts, the two timed
// in turns (plain, speculative, plain, ...; each side's fastest of --rounds). The text must be
// plain decoding's, id for id, before a time is given. The first line gives the machine (lscpu's
// model name), the thread (node runs the model on one) and the load average before and after.
//
//   node benchmarks/bench_speculative.mjs [--tokens 96] [--rounds 3] [--model quantized|float]
import { readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { loadModel } from "../book/_static/runtime/transformer.mjs";
import { SERVED } from "../book/_static/runtime/quant.mjs";
import { PromptLookup, speculativeGenerate } from "../book/_static/runtime/speculative.mjs";
import { loadNgramDraft } from "../tests/js/npz.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const N = Number(opt("--tokens", 96));
const ROUNDS = Number(opt("--rounds", 3));
const which = opt("--model", "quantized");
const PROMPTS = ["ROMEO:\nI will", "First Citizen:\n", "JULIET:\nO ", "KING HENRY VI:\n", "MENENIUS:\nWhat",
  "DUKE VINCENTIO:\n"]; // attention_lib.train.measure_serving's

const file = which === "float" ? "shakespeare" : SERVED.shakespeare;
const manifest = JSON.parse(readFileSync(`${root}book/_static/models/${file}.json`, "utf8"));
const bin = readFileSync(`${root}book/_static/models/${file}.bin`);
const model = loadModel(manifest, bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength));
const prompts = PROMPTS.map((p) => model.tokenizer.encode(p));
const drafts = { lookup: new PromptLookup(model.config.n_vocab), ngram: loadNgramDraft() };

const lscpu = spawnSync("lscpu", [], { encoding: "utf8" }).stdout || "";
const cpuModel = (/^Model name:\s*(.+)$/m.exec(lscpu) || [])[1] || cpus()[0].model;
const load0 = loadavg()[0];
console.log(`machine: ${cpuModel} (lscpu), ${cpus().length} CPUs; node ${process.version}, one thread; ` +
  `load average ${load0.toFixed(2)} at the start`);
console.log(`model: ${file} (${manifest.quantization ? manifest.quantization.scheme : "float export"}); ` +
  `${prompts.length} prompts x ${N} new tokens, greedy; each side's fastest of ${ROUNDS}, in turns`);

function timed(f) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const out = f();
  const c = process.cpuUsage(c0);
  return { out, wall: (performance.now() - t0) / 1000, cpu: (c.user + c.system) / 1e6 };
}

// What one pass of the target costs by its number of rows (the drafts it checks, plus one), after
// a 64-token context: the speed-up is at most tokens per pass / (cost of k + 1 rows / cost of 1).
// The sweep runs twice and the second is printed: V8 first runs WebAssembly and JavaScript on its
// baseline compilers, and a first sweep's n = 1 took about three times a warm step.
{
  const cache = model.newCache();
  model.forwardRows(prompts[0].concat(new Array(64 - prompts[0].length).fill(prompts[0][0])), cache);
  const REPS = 30;
  const sweep = () => {
    const cost = [];
    for (let n = 1; n <= 9; n++) {
      const toks = new Array(n).fill(prompts[0][1]);
      const t = timed(() => {
        for (let r = 0; r < REPS; r++) {
          model.forwardRows(toks, cache, false, true);
          for (const layer of cache) layer.length = 64;
        }
      });
      cost.push({ n, wall: (1000 * t.wall) / REPS, cpu: (1000 * t.cpu) / REPS });
    }
    return cost;
  };
  sweep(); // warm-up
  const cost = sweep();
  console.log("\none pass of the target over n rows after 64 tokens (mean of 30, warm), against n = 1:");
  console.log(cost.map((c) => `n=${c.n} ${c.cpu.toFixed(2)} ms CPU (${(c.cpu / cost[0].cpu).toFixed(2)}x)`).join(", "));
}

const plainIds = prompts.map((p) => model.generate(p, N, { temperature: 0 })); // warm-up, and the reference
console.log("\ndraft   k  kept   tokens/pass  plain wall  spec wall  speed-up  plain CPU  spec CPU  speed-up  same");
const rows = [];
for (const [name, draft] of Object.entries(drafts)) {
  for (let k = 1; k <= 8; k++) {
    const best = { pw: Infinity, sw: Infinity, pc: Infinity, sc: Infinity };
    let stats = null;
    let same = true;
    for (let r = 0; r < ROUNDS; r++) {
      const plain = timed(() => prompts.map((p) => model.generate(p, N, { temperature: 0 })));
      const spec = timed(() => prompts.map((p) => speculativeGenerate(model, draft, p, N, { k })));
      same &&= plain.out.every((ids, i) => ids.join() === plainIds[i].join());
      same &&= spec.out.every((o, i) => o.ids.join() === plainIds[i].join());
      best.pw = Math.min(best.pw, plain.wall);
      best.sw = Math.min(best.sw, spec.wall);
      best.pc = Math.min(best.pc, plain.cpu);
      best.sc = Math.min(best.sc, spec.cpu);
      stats = spec.out.map((o) => o.stats);
    }
    if (!same) throw new Error(`${name}, k = ${k}: speculative output differs from plain greedy decoding`);
    const passes = stats.reduce((s, x) => s + x.targetPasses, 0);
    const kept = stats.reduce((s, x) => s + x.accepted, 0) / stats.reduce((s, x) => s + x.drafted, 0);
    const row = { name, k, kept, tpp: (N * prompts.length) / passes, wall: best.pw / best.sw, cpu: best.pc / best.sc };
    rows.push(row);
    console.log(`${name.padEnd(7)} ${k}  ${(100 * kept).toFixed(1).padStart(5)}%  ${row.tpp.toFixed(2).padStart(11)}  ` +
      `${best.pw.toFixed(3).padStart(8)} s  ${best.sw.toFixed(3).padStart(7)} s  ${row.wall.toFixed(2).padStart(7)}x  ` +
      `${best.pc.toFixed(3).padStart(7)} s  ${best.sc.toFixed(3).padStart(6)} s  ${row.cpu.toFixed(2).padStart(7)}x  ${same}`);
  }
}
for (const name of Object.keys(drafts)) {
  const mine = rows.filter((r) => r.name === name);
  const top = mine.reduce((a, b) => (b.cpu > a.cpu ? b : a));
  console.log(`best by CPU time, ${name}: k = ${top.k}, ${(100 * top.kept).toFixed(1)}% kept, ` +
    `${top.tpp.toFixed(2)} tokens per pass, ${top.cpu.toFixed(2)}x CPU, ${top.wall.toFixed(2)}x wall`);
}
console.log(`load average ${loadavg()[0].toFixed(2)} at the end`);
