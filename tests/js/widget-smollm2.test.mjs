// The SmolLM2 chat widget's download (book/_static/runtime/widget-smollm2.mjs's fetchChunked)
// and head list, in node with a fake fetch and Cache Storage: the chunks joined are the file;
// a second visit reads the cache and fetches no chunk; a damaged, truncated or missing chunk, a
// damaged cached copy, a manifest whose chunks do not add up, and a bad head are each a clear
// message naming what is wrong.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { fetchChunked, parseHeads } from "../../book/_static/runtime/widget-smollm2.mjs";

const sha = (b) => createHash("sha256").update(b).digest("hex");
const folder = new URL("https://example.org/_static/models/smollm2/");

/** A file of n bytes cut into chunks of `size`, its manifest, and the served files (a Map). */
function site(n = 100000, size = 30000) {
  const file = Uint8Array.from({ length: n }, (_, i) => (i * 7919) % 251);
  const chunks = [];
  const files = new Map();
  for (let i = 0, at = 0; at < n; i++, at += size) {
    const part = file.slice(at, at + size);
    chunks.push({ name: `smollm2.gguf.${i}`, bytes: part.length, sha256: sha(part) });
    files.set(`smollm2.gguf.${i}`, part);
  }
  const manifest = { bytes: n, sha256: sha(file), chunks };
  files.set("smollm2.json", new TextEncoder().encode(JSON.stringify(manifest)));
  return { file, manifest, files };
}

function env(files, caches = fakeCaches()) {
  const fetched = [];
  return {
    fetched,
    env: {
      caches,
      digest: async (b) => sha(b),
      fetch: async (url) => {
        const name = String(url).split("/").pop();
        fetched.push(name);
        const body = files.get(name);
        return body ? new Response(body) : new Response("", { status: 404 });
      },
    },
  };
}

function fakeCaches() {
  const stores = new Map();
  return {
    stores,
    open: async (name) => {
      if (!stores.has(name)) stores.set(name, new Map());
      const m = stores.get(name);
      return {
        match: async (key) => (m.has(key) ? new Response(m.get(key)) : undefined),
        put: async (key, response) => m.set(key, new Uint8Array(await response.arrayBuffer())),
        delete: async (key) => m.delete(key),
      };
    },
  };
}

test("the chunks joined are the file; the second visit reads the browser's copy and fetches no chunk", async () => {
  const { file, files } = site();
  const caches = fakeCaches();
  const first = env(files, caches);
  const seen = [];
  const got = await fetchChunked(folder, { env: first.env, progress: (n, total) => seen.push([n, total]) });
  assert.deepEqual(got.bytes, file);
  assert.equal(got.digest, sha(file));
  assert.deepEqual(first.fetched, ["smollm2.json", "smollm2.gguf.0", "smollm2.gguf.1", "smollm2.gguf.2", "smollm2.gguf.3"]);
  assert.deepEqual(seen.at(-1), [file.length, file.length]);
  assert.ok(seen.every(([n], i) => i === 0 || n >= seen[i - 1][0]), "progress only grows");
  const second = env(files, caches);
  const cached = [];
  const again = await fetchChunked(folder, { env: second.env, progress: (n, t, fromCache) => cached.push(fromCache) });
  assert.deepEqual(again.bytes, file);
  assert.deepEqual(second.fetched, ["smollm2.json"]);
  assert.ok(cached.every(Boolean));
});

test("a damaged, truncated or missing chunk is refused by name; a damaged cached copy is fetched again", async () => {
  const { file, files } = site();
  const damaged = new Map(files);
  const bad = Uint8Array.from(files.get("smollm2.gguf.1"));
  bad[5] ^= 1;
  damaged.set("smollm2.gguf.1", bad);
  await assert.rejects(fetchChunked(folder, { env: env(damaged).env }), /^Error: smollm2\.gguf\.1 does not match its SHA-256 in the manifest: the download is damaged$/);
  const short = new Map(files);
  short.set("smollm2.gguf.2", files.get("smollm2.gguf.2").slice(0, 1000));
  await assert.rejects(fetchChunked(folder, { env: env(short).env }), /smollm2\.gguf\.2 stopped at 1000 of its 30000 bytes: the download is truncated/);
  const long = new Map(files);
  long.set("smollm2.gguf.0", new Uint8Array(30001));
  await assert.rejects(fetchChunked(folder, { env: env(long).env }), /smollm2\.gguf\.0 is longer than the manifest's 30000 bytes/);
  const missing = new Map(files);
  missing.delete("smollm2.gguf.3");
  await assert.rejects(fetchChunked(folder, { env: env(missing).env }), /smollm2\.gguf\.3 did not load \(404\)/);
  // a cached chunk that was altered is dropped and fetched again
  const caches = fakeCaches();
  await fetchChunked(folder, { env: env(files, caches).env });
  const store = [...caches.stores.values()][0];
  const key = [...store.keys()][1];
  store.get(key)[0] ^= 1;
  const again = env(files, caches);
  assert.deepEqual((await fetchChunked(folder, { env: again.env })).bytes, file);
  assert.deepEqual(again.fetched, ["smollm2.json", "smollm2.gguf.1"]);
});

test("a manifest that is not one, or whose chunks do not add up to the file, is refused", async () => {
  const { files, manifest } = site();
  const wrong = new Map(files);
  wrong.set("smollm2.json", new TextEncoder().encode(JSON.stringify({ ...manifest, bytes: manifest.bytes + 1 })));
  await assert.rejects(fetchChunked(folder, { env: env(wrong).env }), /smollm2\.json's chunks add up to 100000 bytes, not the file's 100001/);
  wrong.set("smollm2.json", new TextEncoder().encode("{}"));
  await assert.rejects(fetchChunked(folder, { env: env(wrong).env }), /smollm2\.json is not a chunk manifest/);
  wrong.delete("smollm2.json");
  await assert.rejects(fetchChunked(folder, { env: env(wrong).env }), /the model's manifest smollm2\.json did not load \(404\)/);
  // chunks from two exports: each matches its own line, the whole does not
  const other = site(100000, 30000);
  const mixed = new Map(files);
  const alien = Uint8Array.from(other.files.get("smollm2.gguf.0")).map((b) => b ^ 3);
  mixed.set("smollm2.gguf.0", alien);
  mixed.set("smollm2.json", new TextEncoder().encode(JSON.stringify({
    ...manifest, chunks: manifest.chunks.map((c, i) => (i ? c : { ...c, sha256: sha(alien) })) })));
  await assert.rejects(fetchChunked(folder, { env: env(mixed).env }), /the chunks joined do not match the file's SHA-256/);
});

test("head lists: layer.head from 0, anything else named", () => {
  assert.deepEqual(parseHeads("18.6, 17.3;0.0  29.8"), ["18:6", "17:3", "0:0", "29:8"]);
  assert.deepEqual(parseHeads("  "), []);
  assert.throws(() => parseHeads("18.9"), /"18\.9" is not a head: write layer\.head, layer 0 to 29, head 0 to 8/);
  assert.throws(() => parseHeads("30.1"), /"30\.1" is not a head/);
  assert.throws(() => parseHeads("18:6"), /"18:6" is not a head/);
});
