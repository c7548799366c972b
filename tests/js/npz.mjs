// A minimal reader of NumPy's .npz files in node (no pickles: numeric and unicode arrays only),
// for the tests and benchmarks that read a committed checkpoint directly (the n-gram draft of
// data/checkpoints/serving/ngram_draft.npz: loadNgramDraft). Handles np.savez and np.savez_compressed (stored or
// deflated entries, zip64 sizes).
import { readFileSync } from "node:fs";
import { inflateRawSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import { NgramDraft } from "../../book/_static/runtime/speculative.mjs";

function zip64Extra(buf, start, length, fields) {
  // the zip64 extra field (id 1) holds, in order, those of the fields that are 0xffffffff
  for (let p = start; p + 4 <= start + length;) {
    const id = buf.readUInt16LE(p);
    const size = buf.readUInt16LE(p + 2);
    if (id === 1) {
      let q = p + 4;
      for (const key of ["uncompressed", "compressed", "offset"]) {
        if (fields[key] === 0xffffffff) {
          fields[key] = Number(buf.readBigUInt64LE(q));
          q += 8;
        }
      }
    }
    p += 4 + size;
  }
  return fields;
}

function entries(buf) {
  let eocd = -1;
  for (let p = buf.length - 22; p >= Math.max(0, buf.length - 65557); p--) {
    if (buf.readUInt32LE(p) === 0x06054b50) {
      eocd = p;
      break;
    }
  }
  if (eocd < 0) throw new Error("not a zip file (no end of central directory)");
  const count = buf.readUInt16LE(eocd + 10);
  let p = buf.readUInt32LE(eocd + 16);
  const out = new Map();
  for (let i = 0; i < count; i++) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Error("damaged zip central directory");
    const method = buf.readUInt16LE(p + 10);
    const nameLen = buf.readUInt16LE(p + 28);
    const extraLen = buf.readUInt16LE(p + 30);
    const commentLen = buf.readUInt16LE(p + 32);
    const name = buf.toString("utf8", p + 46, p + 46 + nameLen);
    const f = zip64Extra(buf, p + 46 + nameLen, extraLen, {
      compressed: buf.readUInt32LE(p + 20),
      uncompressed: buf.readUInt32LE(p + 24),
      offset: buf.readUInt32LE(p + 42),
    });
    const local = f.offset;
    const data = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const raw = buf.subarray(data, data + f.compressed);
    if (method !== 0 && method !== 8) throw new Error(`${name}: zip method ${method} is not supported`);
    out.set(name, method === 8 ? inflateRawSync(raw) : raw);
    p += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

function parseNpy(b, name) {
  if (b.readUInt8(0) !== 0x93 || b.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${name} is not a .npy array`);
  const major = b.readUInt8(6);
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = b.toString("latin1", major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${name}: Fortran order is not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(",").filter((s) => s.trim()).map(Number);
  const body = b.buffer.slice(b.byteOffset + start, b.byteOffset + b.length);
  const types = { "<i8": BigInt64Array, "<i4": Int32Array, "|u1": Uint8Array, "<f4": Float32Array, "<f8": Float64Array };
  if (types[descr]) return { shape, data: new types[descr](body) };
  const unicode = /^<U(\d+)$/.exec(descr);
  if (unicode) {
    const codes = new Uint32Array(body);
    return { shape, data: String.fromCodePoint(...codes.filter((c) => c !== 0)) };
  }
  throw new Error(`${name}: dtype ${descr} is not supported`);
}

/** The arrays of an .npz file: name (without .npy) -> {shape, data}. */
export function readNpz(path) {
  const out = {};
  for (const [name, bytes] of entries(readFileSync(path))) out[name.replace(/\.npy$/, "")] = parseNpy(bytes, name);
  return out;
}

/** The library's n-gram draft (attention_lib.models.ngram_draft), from its committed .npz. */
export function loadNgramDraft(path = fileURLToPath(new URL("../../data/checkpoints/serving/ngram_draft.npz", import.meta.url))) {
  const a = readNpz(path);
  const cfg = JSON.parse(a.config.data);
  const tables = [];
  for (let n = 1; n <= cfg.order; n++) tables.push({ keys: a[`keys_${n}`].data, labels: a[`labels_${n}`].data });
  return new NgramDraft(tables, cfg.n_vocab);
}
