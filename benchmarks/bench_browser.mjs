// Speed of the in-browser runtime (book/_static/runtime/transformer.mjs):
//
//  1. in node, ms per generated token with the KV cache, for each exported model
//     (wall-clock and CPU time of this process: on a busy machine the CPU time is the
//     steadier figure); goal < 5 ms for stories260k and shakespeare;
//  2. in Chromium (headless), the time from page load to the first generated token of a
//     widget that is clicked as soon as the page has loaded (weights fetched, parsed and the
//     prompt run: the widget loads its model on first use), and from the click alone;
//     goal < 1 s.
//
//   node benchmarks/bench_browser.mjs [--tokens 100] [--chromium /usr/bin/chromium] [--no-browser]
import { readFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { spawn } from "node:child_process";
import { tmpdir, loadavg, cpus } from "node:os";
import { join, extname } from "node:path";
import { fileURLToPath } from "node:url";
import { loadModel } from "../book/_static/runtime/transformer.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const N = Number(opt("--tokens", 100));
const chromium = opt("--chromium", "/usr/bin/chromium");
const PROMPTS = { shakespeare: "ROMEO:\n", stories260k: "Once upon a time", translator: "I like green apples." };
const models = ["shakespeare", "stories260k", "translator"].filter((n) => existsSync(`${root}book/_static/models/${n}.json`));

console.log(`machine: ${cpus().length} cores (${cpus()[0].model}), load average ${loadavg().map((x) => x.toFixed(1)).join(" ")}; node ${process.version}`);
console.log("\n1. ms per generated token, KV cache, one token at a time (best of 3 runs)");
for (const name of models) {
  const t0 = performance.now();
  const model = loadModel(JSON.parse(readFileSync(`${root}book/_static/models/${name}.json`, "utf8")),
    readFileSync(`${root}book/_static/models/${name}.bin`));
  const loadMs = performance.now() - t0;
  if (name === "translator") {
    let best = Infinity;
    for (let r = 0; r < 3; r++) {
      const t = performance.now();
      const out = model.translate(PROMPTS[name], { details: true });
      best = Math.min(best, (performance.now() - t) / Math.max(1, out.ids.length + 1));
    }
    console.log(`  ${name.padEnd(12)} load ${loadMs.toFixed(0)} ms; ${best.toFixed(2)} ms per French token (greedy, encoder included)`);
    continue;
  }
  const ids = model.tokenizer.encode(PROMPTS[name]);
  const n = Math.min(N, model.maxLen - ids.length);
  model.generate(ids, 8, { temperature: 0 }); // warm up the JIT
  let wall = Infinity;
  let cpu = Infinity;
  for (let r = 0; r < 3; r++) {
    const c0 = process.cpuUsage();
    const t = performance.now();
    model.generate(ids, n, { temperature: 0.8, topK: 40, seed: r });
    wall = Math.min(wall, (performance.now() - t) / n);
    const c = process.cpuUsage(c0);
    cpu = Math.min(cpu, (c.user + c.system) / 1000 / n);
  }
  console.log(`  ${name.padEnd(12)} load ${loadMs.toFixed(0)} ms; ${n} tokens: ${wall.toFixed(2)} ms/token wall, ` +
    `${cpu.toFixed(2)} ms/token CPU${wall < 5 || name === "translator" ? "" : "  (goal < 5 ms)"}`);
}

if (args.includes("--no-browser") || !existsSync(chromium)) {
  if (!args.includes("--no-browser")) console.log(`\n2. skipped: no Chromium at ${chromium}`);
  process.exit(0);
}

// 2. Chromium: a page with one widget, clicked at the load event; the page reports back.
console.log("\n2. Chromium, headless: page load -> first token (widget clicked at the load event)");
const page = (name) => `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>bench</title>
<link rel="stylesheet" href="../_static/runtime/widgets.css"></head><body>
<div class="aft-widget" data-model="${name}" data-kind="${name === "translator" ? "translator" : "generate"}"></div>
<script type="module">
const t0 = performance.timeOrigin;
const m = await import("../_static/runtime/widgets.mjs");
m.mountAll();
const report = (r) => fetch("/result", { method: "POST", body: JSON.stringify(r) });
const go = () => {
  const w = document.querySelector(".aft-widget");
  const click = performance.now();
  const seen = new MutationObserver(() => {
    const first = w.querySelector("button.aft-token, .aft-french:not(:empty)");
    if (first) {
      seen.disconnect();
      const now = performance.now();
      report({ loadToFirst: now, clickToFirst: now - click });
    }
  });
  seen.observe(w, { childList: true, subtree: true, characterData: true });
  w.querySelector("button.aft-go").click();
};
if (document.readyState === "complete") go(); else addEventListener("load", go);
</script></body></html>`;

const types = { ".mjs": "text/javascript", ".js": "text/javascript", ".css": "text/css", ".json": "application/json", ".bin": "application/octet-stream", ".html": "text/html" };
for (const name of models) {
  const results = [];
  for (let run = 0; run < 3; run++) {
    const result = await new Promise((resolve) => {
      let child;
      const server = createServer((req, res) => {
        if (req.method === "POST" && req.url === "/result") {
          let body = "";
          req.on("data", (c) => { body += c; });
          req.on("end", () => { res.end("ok"); child.kill("SIGKILL"); server.close(); resolve(JSON.parse(body)); });
          return;
        }
        const url = new URL(req.url, "http://x").pathname;
        if (url === "/book/bench.html") {
          res.writeHead(200, { "content-type": "text/html" });
          return res.end(page(name));
        }
        const file = join(root, "book", url);
        if (!url.startsWith("/_static/") || !existsSync(file)) {
          res.writeHead(404);
          return res.end();
        }
        res.writeHead(200, { "content-type": types[extname(file)] || "application/octet-stream" });
        res.end(readFileSync(file));
      });
      server.listen(0, "127.0.0.1", () => {
        const profile = mkdtempSync(join(tmpdir(), "bench-chromium-"));
        child = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
          "--disable-background-networking", "--disable-extensions", `--user-data-dir=${profile}`,
          `http://127.0.0.1:${server.address().port}/book/bench.html`], { stdio: "ignore" });
        child.on("exit", () => setTimeout(() => {
          try {
            rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
          } catch {
            // Chromium's helpers may still be writing; the folder is in the temporary directory
          }
        }, 500));
        setTimeout(() => { child.kill("SIGKILL"); server.close(); resolve(null); }, 120000);
      });
    });
    if (result) results.push(result);
  }
  if (!results.length) {
    console.log(`  ${name.padEnd(12)} no result within 120 s`);
    continue;
  }
  const best = (k) => Math.min(...results.map((r) => r[k]));
  const first = best("loadToFirst");
  console.log(`  ${name.padEnd(12)} page load -> first ${name === "translator" ? "translation" : "token"}: ` +
    `${first.toFixed(0)} ms (click -> first: ${best("clickToFirst").toFixed(0)} ms; best of ${results.length})` +
    `${first < 1000 ? "" : "  (goal < 1 s)"}`);
}
