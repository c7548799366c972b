// gguf.mjs: read a GGUF file (llama.cpp's format) in the browser: its metadata (the model's
// sizes, the tokenizer's vocabulary and merges) and where each tensor's bytes lie. Nothing is
// copied or converted here: the caller keeps the quantized blocks as they are (smollm2.mjs).
//
// A GGUF file (version 2 or 3, little-endian) is:
//   "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: (string key, u32 type, value) each,
//   tensor infos: (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset) each,
//   padding to `general.alignment` (32 by default), then the tensors' data, each at its
//   offset from there. A string is a u64 length and that many UTF-8 bytes; dims go
//   fastest first (dims[0] is the length of a row).

/** ggml's tensor types that the runtime reads: block size (numbers) and bytes per block. */
export const GGML_TYPES = {
  0: { name: "F32", block: 1, bytes: 4 },
  1: { name: "F16", block: 1, bytes: 2 },
  2: { name: "Q4_0", block: 32, bytes: 18 },
  3: { name: "Q4_1", block: 32, bytes: 20 },
  8: { name: "Q8_0", block: 32, bytes: 34 },
};

const SCALAR = {
  0: ["getUint8", 1], 1: ["getInt8", 1], 2: ["getUint16", 2], 3: ["getInt16", 2],
  4: ["getUint32", 4], 5: ["getInt32", 4], 6: ["getFloat32", 4], 7: ["getUint8", 1],
  10: ["getBigUint64", 8], 11: ["getBigInt64", 8], 12: ["getFloat64", 8],
};

/**
 * The header of a GGUF file: {version, metadata, tensors, dataOffset}. `bytes` (a Uint8Array
 * or ArrayBuffer) needs to hold only the header when `fileBytes` (the whole file's length)
 * is given; otherwise it is the whole file and every tensor must lie inside it. metadata
 * maps each key to its value (numbers, strings, booleans, arrays); tensors maps each name
 * to {name, dims, type, typeName, offset (from the file's start), bytes}. `what` names the
 * file in errors. Anything malformed is an Error with a one-line message naming it.
 */
export function readGGUF(bytes, { fileBytes, what = "the GGUF file" } = {}) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const total = fileBytes ?? u8.byteLength;
  let at = 0;
  const need = (n, whatFor) => {
    if (at + n > u8.byteLength) {
      throw new Error(`${what} ends inside its header (${whatFor} at byte ${at}): it is truncated or not GGUF`);
    }
  };
  const u32 = (whatFor) => {
    need(4, whatFor);
    const v = view.getUint32(at, true);
    at += 4;
    return v;
  };
  const u64 = (whatFor) => {
    need(8, whatFor);
    const v = view.getBigUint64(at, true);
    at += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${what}: ${whatFor} is ${v}, too large: the file is damaged`);
    return Number(v);
  };
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const string = (whatFor) => {
    const n = u64(`the length of ${whatFor}`);
    need(n, whatFor);
    let s;
    try {
      s = decoder.decode(u8.subarray(at, at + n));
    } catch {
      throw new Error(`${what}: ${whatFor} at byte ${at} is not UTF-8: the file is damaged`);
    }
    at += n;
    return s;
  };
  const value = (type, key) => {
    if (type === 8) return string(`the value of ${key}`);
    if (type === 9) {
      const inner = u32(`the element type of ${key}`);
      const n = u64(`the length of ${key}`);
      if (inner === 8) return Array.from({ length: n }, () => string(`an element of ${key}`));
      const s = SCALAR[inner];
      if (!s) throw new Error(`${what}: ${key} is an array of unknown type ${inner}: the file is damaged`);
      need(n * s[1], key);
      const out = new Array(n);
      for (let i = 0; i < n; i++, at += s[1]) out[i] = view[s[0]](at, true);
      if (inner === 10 || inner === 11) return out.map(Number);
      return inner === 7 ? out.map(Boolean) : out;
    }
    const s = SCALAR[type];
    if (!s) throw new Error(`${what}: ${key} has unknown type ${type}: the file is damaged`);
    need(s[1], key);
    let v = view[s[0]](at, true);
    at += s[1];
    if (type === 10 || type === 11) v = Number(v);
    return type === 7 ? Boolean(v) : v;
  };

  need(4, "the magic");
  const magic = String.fromCharCode(u8[0], u8[1], u8[2], u8[3]);
  if (magic !== "GGUF") throw new Error(`${what} does not start with "GGUF" (it starts with ${JSON.stringify(magic)}): not a GGUF file`);
  at = 4;
  const version = u32("the version");
  if (version !== 2 && version !== 3) throw new Error(`${what} is GGUF version ${version}; the runtime reads versions 2 and 3`);
  const nTensors = u64("the tensor count");
  const nKv = u64("the metadata count");
  if (nTensors > 1e6 || nKv > 1e6) throw new Error(`${what} claims ${nTensors} tensors and ${nKv} metadata keys: the file is damaged`);
  const metadata = {};
  for (let i = 0; i < nKv; i++) {
    const key = string(`metadata key ${i}`);
    metadata[key] = value(u32(`the type of ${key}`), key);
  }
  const infos = [];
  for (let i = 0; i < nTensors; i++) {
    const name = string(`tensor name ${i}`);
    const nDims = u32(`the dimensions of ${name}`);
    if (nDims < 1 || nDims > 4) throw new Error(`${what}: tensor ${name} has ${nDims} dimensions: the file is damaged`);
    const dims = Array.from({ length: nDims }, () => u64(`a dimension of ${name}`));
    const type = u32(`the type of ${name}`);
    const offset = u64(`the offset of ${name}`);
    infos.push({ name, dims, type, offset });
  }
  const align = metadata["general.alignment"] ?? 32;
  if (!(Number.isInteger(align) && align > 0)) throw new Error(`${what}: general.alignment is ${align}, not a positive integer`);
  const dataOffset = Math.ceil(at / align) * align;
  const tensors = {};
  for (const t of infos) {
    const g = GGML_TYPES[t.type];
    if (!g) throw new Error(`${what}: tensor ${t.name} has ggml type ${t.type}, which the runtime does not read (F32, F16, Q4_0, Q4_1, Q8_0)`);
    const n = t.dims.reduce((a, b) => a * b, 1);
    if (t.dims[0] % g.block) throw new Error(`${what}: tensor ${t.name}'s rows of ${t.dims[0]} are not whole ${g.name} blocks of ${g.block}`);
    const size = (n / g.block) * g.bytes;
    const start = dataOffset + t.offset;
    if (start + size > total) {
      throw new Error(`${what}: tensor ${t.name} (bytes ${start}..${start + size}) lies past the file's end (${total} bytes): the file is truncated`);
    }
    tensors[t.name] = { name: t.name, dims: t.dims, type: t.type, typeName: g.name, offset: start, bytes: size };
  }
  return { version, metadata, tensors, dataOffset };
}
