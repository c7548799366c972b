// widget-smollm2.mjs: SmolLM2-135M-Instruct, a real chat model, in the SmolLM2 chapter's page
// (loaded by widgets.mjs for a <div class="aft-widget" data-kind="smollm2">).
//
// Nothing loads until the reader asks: a button states the download (about 98 MB) first. The
// GGUF file (scripts/export_smollm2.py, exported when the site is built, never committed) is
// served in chunks of at most 25 MB; each is checked against its SHA-256 in the manifest and
// kept in the browser's Cache Storage, so a second visit starts without downloading; the whole
// file is checked again before smollm2.mjs reads it. Then a chat: the model's chat template,
// tokens streamed as they are written, Stop, temperature and top-p, tokens per second; beside
// it, where each head of a chosen layer looked from the newest token (heads numbered from 0, as
// in the code); head switches: zero any set of heads ("layer.head", as the chapter writes them)
// and regenerate, with a preset that switches off the chapter's best induction heads and one
// that switches off as many random heads, and a repeated text continued as plain text (no chat
// template), whose copying those induction heads carry. The conversation is read in chunks,
// with pauses for the page, and a new turn reads only its new tokens (the KV cache is kept).
import { loadSmolLM2 } from "./smollm2.mjs";
import { SIMD_SUPPORTED } from "./simd.mjs";
import { makeRng, pickToken, sha256Hex } from "./transformer.mjs";
import { h, blank, drawHeatmap, describe, fillSelect, waitingSelect, webDigest, nextFrame } from "./widgets.mjs";

/** The site's _static/models/smollm2/ folder, from this module's own address. */
const FOLDER = new URL("../models/smollm2/", import.meta.url);
const CACHE_PREFIX = "aft-smollm2-";
/** The chapter's five best induction heads (layer.head, best first: 13_smollm2.ipynb). */
export const INDUCTION_HEADS = ["18.6", "17.3", "17.4", "17.5", "18.7"];
/**
 * The longest conversation the widget reads (tokens). With a reply of up to 256 tokens, the
 * KV cache (30 layers, keys and values of 192 floats a position, grown by doubling) stays
 * under 100 MB: with the 96 MB of weights, the page holds under 200 MB for the model.
 */
export const MAX_CONTEXT = 1024;
const MAX_REPLY = 256;
const PLAIN_REPLY = 24; // tokens a plain text is continued by

const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

/**
 * The chunked file described by `folder`/smollm2.json, as one Uint8Array, every chunk and the
 * whole checked against the manifest's sizes and SHA-256 (an Error naming the chunk
 * otherwise). Chunks are taken from Cache Storage when there (and checked), else fetched and
 * then kept there. env: {fetch, caches, digest(bytes) -> hex} (the page's by default), and
 * progress(received, total, fromCache).
 */
export async function fetchChunked(folder = FOLDER, { progress = () => {}, env = {} } = {}) {
  const fetchFn = env.fetch ?? globalThis.fetch.bind(globalThis);
  const digest = env.digest ?? (async (b) => (await webDigest(b)) ?? sha256Hex(b));
  const r = await fetchFn(new URL("smollm2.json", folder));
  if (!r.ok) throw new Error(`the model's manifest smollm2.json did not load (${r.status})`);
  const manifest = await r.json();
  if (!(Array.isArray(manifest.chunks) && manifest.chunks.length && Number.isInteger(manifest.bytes))) {
    throw new Error("smollm2.json is not a chunk manifest (bytes, sha256, chunks)");
  }
  const sum = manifest.chunks.reduce((t, c) => t + c.bytes, 0);
  if (sum !== manifest.bytes) throw new Error(`smollm2.json's chunks add up to ${sum} bytes, not the file's ${manifest.bytes}`);
  let cache = null;
  try {
    const caches = env.caches ?? globalThis.caches;
    if (caches) cache = await caches.open(CACHE_PREFIX + manifest.sha256.slice(0, 16));
  } catch {
    cache = null; // no Cache Storage here (not a secure context): download every visit
  }
  const out = new Uint8Array(manifest.bytes);
  let at = 0;
  for (const c of manifest.chunks) {
    const url = new URL(c.name, folder);
    let bytes = null;
    let cached = false;
    if (cache) {
      const hit = await cache.match(url.href);
      if (hit) {
        bytes = new Uint8Array(await hit.arrayBuffer());
        if (bytes.length !== c.bytes || (await digest(bytes)) !== c.sha256) {
          await cache.delete(url.href); // damaged in the cache: fetch it again
          bytes = null;
        } else cached = true;
      }
    }
    if (!bytes) {
      bytes = await download(fetchFn, url, c, (got) => progress(at + got, manifest.bytes, false));
      if ((await digest(bytes)) !== c.sha256) throw new Error(`${c.name} does not match its SHA-256 in the manifest: the download is damaged`);
      if (cache) {
        try {
          await cache.put(url.href, new Response(bytes));
        } catch {
          // a full disk or a private window: the model still runs, the next visit downloads again
        }
      }
    }
    out.set(bytes, at);
    at += c.bytes;
    progress(at, manifest.bytes, cached);
  }
  const whole = await digest(out);
  if (whole !== manifest.sha256) throw new Error("the chunks joined do not match the file's SHA-256: a chunk is from another export");
  return { bytes: out, digest: whole, manifest };
}

/** One chunk's bytes, its length checked against the manifest's (progress(received)). */
async function download(fetchFn, url, chunk, progress) {
  const r = await fetchFn(url);
  if (!r.ok) throw new Error(`${chunk.name} did not load (${r.status})`);
  const out = new Uint8Array(chunk.bytes);
  let at = 0;
  if (r.body && r.body.getReader) {
    const reader = r.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (at + value.length > chunk.bytes) throw new Error(`${chunk.name} is longer than the manifest's ${chunk.bytes} bytes: the download is damaged`);
      out.set(value, at);
      at += value.length;
      progress(at);
    }
  } else {
    const all = new Uint8Array(await r.arrayBuffer());
    if (all.length > chunk.bytes) throw new Error(`${chunk.name} is longer than the manifest's ${chunk.bytes} bytes: the download is damaged`);
    out.set(all);
    at = all.length;
  }
  if (at !== chunk.bytes) throw new Error(`${chunk.name} stopped at ${at} of its ${chunk.bytes} bytes: the download is truncated`);
  return out;
}

/** "18.6, 17.3" -> ["18:6", "17:3"] (the model's zeroHeads keys); an Error naming a bad entry. */
export function parseHeads(text, nLayers = 30, nHeads = 9) {
  const out = [];
  for (const part of text.split(/[\s,;]+/).filter(Boolean)) {
    const m = /^(\d+)\.(\d+)$/.exec(part);
    if (!m || Number(m[1]) >= nLayers || Number(m[2]) >= nHeads) {
      throw new Error(`"${part}" is not a head: write layer.head, layer 0 to ${nLayers - 1}, head 0 to ${nHeads - 1} (such as 18.6)`);
    }
    out.push(`${Number(m[1])}:${Number(m[2])}`);
  }
  return out;
}

/** Tokens of a prompt run at once between two pauses (the page stays responsive while it reads). */
export const PROMPT_CHUNK = 32;

/**
 * The reply, one token at a time, as DecoderLM.steps writes it (the same ids: the prompt's
 * rows, run in chunks, get the floats they get at once; the same sampler and seeded PRNG),
 * but pausing for the page between chunks of the prompt and between tokens, and ending when
 * stop() says so or at <|im_end|>. Yields {id, logits, attention (of the newest token), position}.
 * The prompt and maxNew fit the model's context (the widget crops to MAX_CONTEXT first).
 * `cache`: a KV cache whose first `reuse` positions hold ids[0 .. reuse) (the conversation
 * so far, read in an earlier turn): only the rest is read (at least the last token, whose
 * logits choose the first new one); afterwards it holds the prompt and the reply but its last
 * token.
 */
export async function* replySteps(model, ids, maxNew, options, stop = () => false, progress = () => {},
  cache = model.newCache(), reuse = 0) {
  const opts = { temperature: 1, topK: 0, topP: 1, seed: 0, ...options };
  const start = Math.max(0, Math.min(reuse, cache[0].length, ids.length - 1));
  for (const layer of cache) layer.length = start; // later positions are written again
  let out = null;
  for (let i = start; i < ids.length; i += PROMPT_CHUNK) {
    const end = Math.min(ids.length, i + PROMPT_CHUNK);
    out = model.forwardRows(ids.slice(i, end), cache, end === ids.length);
    progress(end);
    await nextFrame();
    if (stop()) return;
  }
  const rng = makeRng(opts.seed);
  for (let n = 0; n < maxNew; n++) {
    const id = pickToken(out.logits, opts, rng);
    yield { id, logits: out.logits, attention: out.attention, position: ids.length + n - 1 };
    if (id === model.tokenizer.eosId || n + 1 === maxNew || stop()) return;
    out = model.forwardRows([id], cache, true);
  }
}

let shared = null; // Promise<model>, shared by every SmolLM2 widget of the page

function loadShared(say) {
  if (!shared) {
    shared = (async () => {
      const { bytes, digest } = await fetchChunked(FOLDER, {
        progress: (got, total, cached) => say(`${cached ? "Reading the browser's copy" : "Downloading"}: ${mb(got)} of ${mb(total)}…`),
      });
      say("Reading the model (30 layers, weights kept in 4 bits)…");
      await nextFrame();
      return loadSmolLM2(bytes, { digest });
    })();
    shared.catch(() => { shared = null; }); // let a later press try again
  }
  return shared;
}

export function mountSmolLM2(root) {
  const id = (s) => `${root.id}-${s}`;
  const size = Number(root.dataset.bytes) || 98362432;
  const load = h("button", { type: "button", class: "aft-go" }, `Load SmolLM2-135M-Instruct (${mb(size)} download)`);
  const status = h("p", { class: "aft-status", role: "status", "aria-live": "polite" },
    `Nothing is downloaded until you press the button: the model is ${mb(size)} (134.5 million ` +
    "parameters in 4 bits), fetched from this site once and kept by your browser for later visits.");
  const log = h("div", { class: "aft-output aft-chat", role: "log", "aria-live": "polite", "aria-label": "The conversation" });
  const message = h("textarea", { id: id("message"), rows: 2, spellcheck: "true", disabled: true });
  message.value = root.dataset.prompt ?? "What is the capital of France?";
  const send = h("button", { type: "button", class: "aft-go", disabled: true }, "Send");
  const stop = h("button", { type: "button", disabled: true }, "Stop");
  const again = h("button", { type: "button", disabled: true }, "Regenerate");
  const clear = h("button", { type: "button", disabled: true }, "New chat");
  const temperature = h("input", { type: "range", id: id("temp"), min: 0, max: 1.5, step: 0.05, value: 0 });
  const tempOut = h("output", { for: id("temp"), class: "aft-value" }, "0 (greedy)");
  const topP = h("input", { type: "range", id: id("topp"), min: 0.05, max: 1, step: 0.05, value: 0.9 });
  const topPOut = h("output", { for: id("topp"), class: "aft-value" }, "0.9");
  temperature.addEventListener("input", () => { tempOut.textContent = Number(temperature.value) === 0 ? "0 (greedy)" : temperature.value; });
  topP.addEventListener("input", () => { topPOut.textContent = topP.value; });
  const layer = waitingSelect(id("layer"), "layer");
  const heads = h("input", { type: "text", id: id("heads"), value: "", placeholder: "none (such as 18.6, 17.3)", disabled: true,
    "aria-describedby": id("heads-help"), style: "width: 100%; box-sizing: border-box; font-family: monospace" });
  const induction = h("button", { type: "button", disabled: true }, "Switch off the top induction heads");
  const random = h("button", { type: "button", disabled: true }, "Switch off as many random heads");
  const repeat = h("button", { type: "button", disabled: true }, "A repeated-text prompt");
  const plain = h("input", { type: "checkbox", id: id("plain"), disabled: true });
  const canvas = h("canvas", { class: "aft-heatmap", role: "img", "aria-label": "No reply written yet" });
  const heatText = h("p", { class: "aft-heat-text" });
  const speed = h("p", { class: "aft-status" });
  root.replaceChildren(
    h("p", { class: "aft-title" }, "SmolLM2-135M-Instruct, running in your browser"),
    h("div", { class: "aft-actions" }, load), status, log,
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("message") }, "Your message (Ctrl+Enter sends)"), message),
    h("p", {}, h("label", { for: id("plain") }, plain, " Plain text: continue the message as it is, without the chat template")),
    h("div", { class: "aft-actions" }, send, " ", stop, " ", again, " ", clear),
    h("div", { class: "aft-controls" },
      h("div", { class: "aft-control" }, h("label", { for: id("temp") }, "Temperature"), temperature, tempOut),
      h("div", { class: "aft-control" }, h("label", { for: id("topp") }, "Top-p"), topP, topPOut)),
    speed,
    h("div", { class: "aft-control aft-prompt" }, h("label", { for: id("heads") }, "Heads switched off (layer.head, from 0)"), heads,
      h("span", { id: id("heads-help"), class: "aft-help" },
        `Their output is set to zero in every step; the chapter's best induction heads are ${INDUCTION_HEADS.join(", ")}.`)),
    h("div", { class: "aft-actions" }, induction, " ", random, " ", repeat),
    h("div", { class: "aft-controls" }, h("div", { class: "aft-control" }, h("label", { for: id("layer") }, "Attention of layer"), layer)),
    h("div", { class: "aft-heat" }, canvas), heatText,
  );
  root.classList.add("aft-live");

  let model = null;
  let history = []; // {role, content}
  let writing = false;
  let stopped = false;
  let last = null; // {tokens, attention} of the newest token, for the map
  let seed = 1;
  // the conversation read so far: its ids, KV cache and the heads that were off, so that a new
  // turn reads only its new tokens
  let session = null;

  const say = (text, error = false) => {
    status.textContent = text;
    status.classList.toggle("aft-error", error);
  };
  const enable = (on) => {
    for (const el of [message, send, again, clear, heads, induction, random, repeat, plain]) el.disabled = !on;
    stop.disabled = on;
  };

  function draw() {
    if (!last || !last.attention) return blank(canvas, "No reply written yet");
    const l = Number(layer.value) || 0;
    // the first token (where many heads park their weight: a sink) and the newest ones, as
    // many as fit the width
    const S = last.tokens.length;
    const fit = Math.max(8, Math.min(32, Math.floor(((canvas.parentElement.clientWidth || 320) - 62) / 16)));
    const cols = S <= fit ? [...Array(S).keys()] : [0, ...Array.from({ length: fit - 1 }, (_, i) => S - fit + 1 + i)];
    const piece = (t) => model.tokenizer.decode([t]).replaceAll("\n", "↵").replaceAll(" ", "␣");
    const labels = cols.map((c) => (c === 0 && S > fit ? `${piece(last.tokens[0])}…` : piece(last.tokens[c])));
    const rows = last.attention[l].map((w) => cols.map((c) => w[c]));
    const rowLabels = rows.map((_, i) => (model.zeroHeads.has(`${l}:${i}`) ? `head ${i} ✕` : `head ${i}`));
    const shown = S <= fit ? `all ${S} tokens` : `the first token and the last ${fit - 1}`;
    const text = `Layer ${l}: where each head (a row) looked from the newest token, over ${shown} (columns)`;
    drawHeatmap(canvas, rows, rowLabels, labels, `${text}. ${describe(rows, rowLabels, labels)}.`);
    const off = rowLabels.some((r) => r.endsWith("✕")) ? " ✕: a head switched off (its pattern is drawn; its output is zero)." : "";
    heatText.textContent = `${text}. Colour: the weight, from 0 to 1.${off}`;
  }
  layer.addEventListener("change", draw);

  load.addEventListener("click", async () => {
    load.disabled = true;
    try {
      model = await loadShared((m) => say(m));
    } catch (err) {
      load.disabled = false;
      return say(`The model did not load: ${err.message}. Press the button to try again.`, true);
    }
    fillSelect(layer, model.config.n_layers, "layer");
    layer.value = "18";
    load.hidden = true;
    enable(true);
    stop.disabled = true;
    say(SIMD_SUPPORTED ? "Ready. Write a message." :
      "Ready, but this browser has no WebAssembly SIMD: the model runs on its scalar path, many times slower.");
    root.dataset.state = "ready";
  });

  function render(extra = null) {
    log.replaceChildren(...history.map((m) => h("p", { class: `aft-turn aft-${m.role}` }, h("strong", {}, m.role === "user" ? "You: " : "SmolLM2: "), m.content)));
    if (extra) log.append(extra);
  }

  async function write(fromHistory) {
    if (writing) return say("Still writing the last reply: press Stop first.", true);
    let zero;
    try {
      zero = parseHeads(heads.value);
    } catch (err) {
      return say(err.message, true);
    }
    if (!fromHistory) {
      const text = message.value;
      if (!text.trim()) return say("Write a message first.", true);
      history.push({ role: "user", content: text });
      message.value = "";
    } else if (!history.length || history[history.length - 1].role !== "assistant") {
      return say("Nothing to regenerate yet: send a message first.", true);
    } else history.pop(); // the last reply, written again
    model.zeroHeads = new Set(zero);
    // plain text: the last message alone, continued (the model as a text predictor: copying
    // a repeated text is the induction heads' work); else the whole chat in its template
    const asText = plain.checked;
    let ids = model.tokenizer.encode(asText ? history[history.length - 1].content : model.tokenizer.chat(history));
    let note = "";
    if (ids.length > MAX_CONTEXT) {
      ids = ids.slice(ids.length - MAX_CONTEXT);
      note = ` The conversation is longer than the widget's ${MAX_CONTEXT} tokens: the model reads its last ${MAX_CONTEXT}.`;
    }
    // the cache of the last turn serves as far as its tokens agree with these (and the same
    // heads were off)
    const headsKey = [...model.zeroHeads].sort().join(" ");
    let reuse = 0;
    if (!note && session && session.heads === headsKey) {
      while (reuse < session.ids.length && reuse < ids.length && session.ids[reuse] === ids[reuse]) reuse++;
    } else session = null;
    const cache = session ? session.cache : model.newCache();
    writing = true;
    stopped = false;
    enable(false);
    const reply = h("span");
    render(h("p", { class: "aft-turn aft-assistant" }, h("strong", {}, asText ? "SmolLM2 continues: " : "SmolLM2: "), reply));
    say(`Reading the conversation (${ids.length - reuse} new tokens of ${ids.length})…${note}`);
    await nextFrame();
    const stream = model.tokenizer.streamDecoder();
    const out = [];
    const t0 = performance.now();
    let t1 = 0;
    try {
      const opts = { temperature: Number(temperature.value), topP: Number(topP.value), seed: seed++ };
      const progress = (done) => say(`Reading the conversation: ${done} of ${ids.length} tokens…${note}`);
      session = null; // until this turn is done
      for await (const s of replySteps(model, ids, asText ? PLAIN_REPLY : MAX_REPLY, opts, () => stopped, progress, cache, reuse)) {
        if (!t1) {
          t1 = performance.now();
          say(`Writing…${note}`);
        }
        out.push(s.id);
        last = { tokens: [...ids, ...out].slice(0, s.position + 1), attention: s.attention };
        if (s.id !== model.tokenizer.eosId) reply.append(stream.push(s.id));
        if (out.length % 4 === 1) draw();
        const rate = out.length > 1 ? ((out.length - 1) / ((performance.now() - t1) / 1000)).toFixed(1) : "…";
        speed.textContent = `${out.length} tokens, ${rate} tokens per second (first token after ${((t1 - t0) / 1000).toFixed(1)} s)`;
        await nextFrame(); // let the page draw, and Stop be pressed
        if (stopped) break;
      }
      reply.append(stream.flush());
      if (out.length) session = { ids: [...ids, ...out.slice(0, -1)], cache, heads: headsKey };
    } catch (err) {
      say(`Something went wrong: ${err.message}`, true);
    }
    const textOut = model.tokenizer.decode(out.filter((i) => i !== model.tokenizer.eosId));
    history.push({ role: "assistant", content: textOut });
    render();
    draw();
    writing = false;
    enable(true);
    stop.disabled = true;
    root.dataset.reply = textOut;
    root.dataset.replyIds = out.join(",");
    root.dataset.state = "done";
    if (!status.classList.contains("aft-error")) {
      const off = zero.length ? ` with ${zero.length} head${zero.length > 1 ? "s" : ""} switched off` : "";
      say(`${stopped ? "Stopped" : "Done"}: ${out.length} tokens${off}.${note}`);
    }
  }

  send.addEventListener("click", () => write(false));
  again.addEventListener("click", () => write(true));
  stop.addEventListener("click", () => { stopped = true; });
  clear.addEventListener("click", () => {
    if (writing) return say("Still writing the last reply: press Stop first.", true);
    history = [];
    last = null;
    session = null;
    render();
    blank(canvas, "No reply written yet");
    say("A new chat. Write a message.");
  });
  message.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) write(false);
  });
  induction.addEventListener("click", () => { heads.value = INDUCTION_HEADS.join(", "); });
  random.addEventListener("click", () => {
    const picked = new Set();
    while (picked.size < INDUCTION_HEADS.length) picked.add(`${Math.floor(Math.random() * 30)}.${Math.floor(Math.random() * 9)}`);
    heads.value = [...picked].join(", ");
  });
  repeat.addEventListener("click", () => {
    // a list of words, twice, and the start of a third time: the model continues it by copying
    // (with the chapter's induction heads switched off it stops copying; with random heads off
    // it mostly goes on)
    const words = "violet anchor seven marble quiet harbour lemon drift copper needle".split(" ");
    message.value = `${words.join(" ")} ${words.join(" ")} ${words.slice(0, 4).join(" ")}`;
    plain.checked = true;
    say("A repeated text, to be continued as plain text: send it, then switch heads off and regenerate.");
  });
}
