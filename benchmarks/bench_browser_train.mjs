// Speed of training in the browser runtime (book/_static/runtime/train.mjs), against the
// library (issue 43; the training half of bench_browser.mjs):
//
//  1. ms per training step (forward, cross-entropy, backward, clipping, Adam) of chapter 9's
//     induction model (batch 32 x 24) and of each own-text preset (Tiny Shakespeare's 65
//     characters), in node and in the NumPy library (attention_lib's TinyGPT in float32,
//     train_step's arithmetic, one BLAS thread), the same sizes, timed in turns (runtime,
//     library, runtime, ...) so that a busy spell of the machine hits both. CPU time of each
//     process (the steadier figure on a shared machine) and wall time; ratio runtime /
//     library (goal: at most 3).
//  2. the time to form the induction head: the widget's run (train-worker.mjs's session)
//     until the held-out accuracy on the predictable tokens reaches 90% (goal: 60 s);
//  3. the "small" preset on Tiny Shakespeare for 180 s of CPU time: the held-out loss on the
//     whole last 10% of the text (goal: at most 2.5 nats per character within 3 minutes).
//
//   node benchmarks/bench_browser_train.mjs [--steps 20] [--rounds 3] [--python .venv/bin/python]
//                                           [--budget 180] [--only speed|induction|text]
import { readFileSync, existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { loadavg, cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { AdamW, TinyGPT, charVocabulary, heldOutLoss, trainStep } from "../book/_static/runtime/train.mjs";
import { INDUCTION, PRESETS } from "../book/_static/runtime/train-tasks.mjs";
import { createSession } from "../book/_static/runtime/train-worker.mjs";
import { makeRng } from "../book/_static/runtime/transformer.mjs";
import { SIMD_SUPPORTED, setScalar } from "../book/_static/runtime/simd.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const STEPS = Number(opt("--steps", 20));
const ROUNDS = Number(opt("--rounds", 3));
const BUDGET = Number(opt("--budget", 180));
const only = opt("--only", null);
const python = opt("--python", existsSync(`${root}.venv/bin/python`) ? `${root}.venv/bin/python` : "python3");

const lscpu = spawnSync("lscpu", [], { encoding: "utf8" }).stdout || "";
const cpuModel = (/^Model name:\s*(.+)$/m.exec(lscpu) || [])[1] || cpus()[0].model;
const load = () => loadavg().map((x) => x.toFixed(1)).join(" ");
console.log(`machine: ${cpuModel} (lscpu), ${cpus().length} CPUs; runtime: node ${process.version}, one thread; ` +
  `library: one BLAS thread; load average ${load()} at the start`);

const cpuNow = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
};

// The library's side: one process per round, printing JSON {cpu_ms, wall_ms} per step.
const LIBRARY = String.raw`
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
from attention_lib.train.shakespeare import build_model
from attention_lib.nn import Adam, clip_grad_norm, softmax_cross_entropy
cfg, B, steps = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
V, T = cfg["n_vocab"], cfg["max_len"]
with threadpool_limits(limits=1):
    model = build_model({**cfg, "dropout": 0.0, "seed": 1}, V)
    layers = model.layers()
    opt = Adam(layers, lr=1e-3, betas=(0.9, 0.99))
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, V, size=(B, T)), rng.integers(0, V, size=(B, T))
    def step():
        model.train(True)
        logits = model.forward(x)
        loss, d = softmax_cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        model.backward(d.reshape(logits.shape).astype(np.float32))
        clip_grad_norm(layers, 1.0)
        opt.step()
    step()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        step()
    print(json.dumps({"cpu_ms": 1e3 * (time.process_time() - c0) / steps,
                      "wall_ms": 1e3 * (time.perf_counter() - w0) / steps}))
`;

function library(cfg, B) {
  const r = spawnSync(python, ["-c", LIBRARY, JSON.stringify(cfg), String(B), String(STEPS)],
    { encoding: "utf8", cwd: root, env: { ...process.env, PYTHONPATH: root, OMP_NUM_THREADS: "1", OPENBLAS_NUM_THREADS: "1" } });
  if (r.status !== 0) throw new Error(`the library's side failed: ${r.stderr.slice(-400)}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1));
}

function runtime(cfg, B, scalar = false) {
  setScalar(scalar);
  const model = new TinyGPT({ ...cfg, seed: 1 });
  const opt = new AdamW(model.params, { lr: 1e-3, betas: [0.9, 0.99] });
  const rng = makeRng(2);
  const T = cfg.max_len;
  const x = Int32Array.from({ length: B * T }, () => Math.floor(rng() * cfg.n_vocab));
  const y = Int32Array.from({ length: B * T }, () => Math.floor(rng() * cfg.n_vocab));
  for (let i = 0; i < 3; i++) trainStep(model, opt, x, y, B, T); // warm the JIT
  const c0 = cpuNow(), w0 = performance.now();
  for (let i = 0; i < STEPS; i++) trainStep(model, opt, x, y, B, T);
  const result = { cpu_ms: (cpuNow() - c0) / STEPS, wall_ms: (performance.now() - w0) / STEPS };
  setScalar(false);
  return result;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

if (!only || only === "speed") {
  console.log(`\n1. ms per training step, median of ${ROUNDS} rounds of ${STEPS} steps, in turns (CPU ms; wall ms); ` +
    `runtime = WebAssembly SIMD kernels (${SIMD_SUPPORTED ? "supported" : "NOT supported here: scalar"}), scalar = the same with setScalar(true)`);
  const cases = [["induction (chapter 9)", { ...INDUCTION.config, positions: "rotary" }, INDUCTION.batch]];
  for (const [name, p] of Object.entries(PRESETS)) {
    cases.push([`own text, ${name}`, { n_vocab: 65, d_model: p.d_model, n_heads: p.n_heads, n_layers: p.n_layers,
      d_ff: p.d_ff, max_len: p.max_len, positions: "learned" }, p.batch]);
  }
  for (const [name, cfg, B] of cases) {
    const js = [], py = [], sc = [];
    for (let r = 0; r < ROUNDS; r++) {
      js.push(runtime(cfg, B));
      py.push(library(cfg, B));
      sc.push(runtime(cfg, B, true));
    }
    const sC = median(sc.map((m) => m.cpu_ms));
    const jc = median(js.map((m) => m.cpu_ms)), pc = median(py.map((m) => m.cpu_ms));
    const jw = median(js.map((m) => m.wall_ms)), pw = median(py.map((m) => m.wall_ms));
    const params = new TinyGPT(cfg).params;
    const n = Object.values(params).reduce((a, p) => a + p.length, 0);
    console.log(`${name.padEnd(24)} ${String(n).padStart(7)} params, batch ${B} x ${cfg.max_len}: ` +
      `runtime ${jc.toFixed(1)} (${jw.toFixed(1)}) ms, scalar ${sC.toFixed(1)} ms CPU, library ${pc.toFixed(1)} (${pw.toFixed(1)}) ms, ` +
      `ratio ${(jc / pc).toFixed(2)} CPU (${(jw / pw).toFixed(2)} wall); load ${load()}`);
  }
}

/** Run a worker session in this thread until `until(message)` or the CPU budget (s). */
function session(start, until, budget) {
  const queue = [];
  let hit = null;
  const c0 = cpuNow(), w0 = performance.now();
  const s = createSession((m) => {
    if (m.type === "error") throw new Error(m.message);
    if (!hit && m.type === "progress" && until(m)) hit = { ...m, cpu: (cpuNow() - c0) / 1000, wall: (performance.now() - w0) / 1000 };
  }, (f) => queue.push(f));
  s.handle(start);
  while (queue.length && !hit && (cpuNow() - c0) / 1000 < budget) queue.shift()();
  return { hit, session: s, cpu: (cpuNow() - c0) / 1000, wall: (performance.now() - w0) / 1000 };
}

if (!only || only === "induction") {
  console.log("\n2. time to form the induction head (held-out accuracy >= 90%), the widget's run");
  const { hit, cpu } = session({ type: "start", task: "induction", every: 10, steps: 2000 }, (m) => m.scores.accuracy >= INDUCTION.formed, BUDGET);
  if (hit) {
    console.log(`formed at step ${hit.step}: ${hit.cpu.toFixed(1)} s CPU, ${hit.wall.toFixed(1)} s wall (the widget's clock: ` +
      `${hit.seconds.toFixed(1)} s); layer 0 on the previous position ${hit.scores.previous.toFixed(2)}, layer 1 on the ` +
      `induction target ${hit.scores.induction.toFixed(2)}, accuracy ${hit.scores.accuracy.toFixed(3)}; load ${load()}`);
  } else console.log(`not formed within ${cpu.toFixed(0)} s CPU`);
}

if (!only || only === "text") {
  console.log(`\n3. the small preset on Tiny Shakespeare for ${BUDGET} s of CPU time: held-out loss (whole last 10%)`);
  const text = readFileSync(`${root}data/shakespeare/input.txt`, "utf8");
  const queue = [];
  const seen = [];
  const s = createSession((m) => {
    if (m.type === "error") throw new Error(m.message);
    if (m.type === "progress") seen.push(m);
  }, (f) => queue.push(f));
  const c0 = cpuNow(), w0 = performance.now();
  s.handle({ type: "start", task: "text", text, preset: "small", every: 50 });
  let crossed = null;
  while (queue.length && (cpuNow() - c0) / 1000 < BUDGET) {
    queue.shift()();
    const m = seen.at(-1);
    if (m && !crossed && m.heldOut <= 2.5) crossed = { step: m.step, cpu: (cpuNow() - c0) / 1000, wall: (performance.now() - w0) / 1000, sample: m.heldOut };
  }
  const cpu = (cpuNow() - c0) / 1000, wall = (performance.now() - w0) / 1000;
  const last = seen.at(-1);
  // the whole held-out text (consecutive windows of 48, the library's validation_loss)
  s.handle({ type: "pause" });
  const { ids } = charVocabulary(text);
  const held = ids.subarray(Math.floor(0.9 * ids.length));
  const full = heldOutLoss(s.model, held, PRESETS.small.max_len, { B: 32 });
  console.log(`${last.step} steps in ${cpu.toFixed(0)} s CPU (${wall.toFixed(0)} s wall): training loss ${last.loss.toFixed(3)}, ` +
    `held-out ${full.toFixed(3)} nats per character on the whole last 10% (${held.length} characters; ` +
    `${last.heldOut.toFixed(3)} on the 48 windows the widget shows); load ${load()}`);
  if (crossed) {
    console.log(`the widget's held-out sample first <= 2.5 at step ${crossed.step}, ${crossed.cpu.toFixed(0)} s CPU ` +
      `(${crossed.wall.toFixed(0)} s wall)`);
  }
}
