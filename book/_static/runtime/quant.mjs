// quant.mjs: weights stored in 8 or 4 bits (GGUF's Q8_0 and Q4_0 blocks), dequantized on load.
//
// scripts/export_models.py writes a quantized matrix as the library's attention_lib.quantize
// does: the rows of the stored matrix (the runtime's (n_in, n_out) matrix transposed when the
// entry says `transposed`: one row per output unit, as GGUF and PyTorch store it) are cut in
// groups of `group` numbers, and each group is one block:
//
//   q8_0: a float16 scale d, then `group` int8 codes q;        weight = d * q
//   q4_0: a float16 scale d, then group / 2 bytes (group 32):  weight = d * (nibble - 8),
//         byte j holding number j in its low nibble and number j + 16 in its high nibble
//
// Every product is rounded to float32 once (Math.fround), as NumPy multiplies two float32
// numbers: the result is the library's `dequantize` bit for bit (tests/js/quant.test.mjs).
// An 8-bit matrix whose rows are not a whole number of groups of 32 is stored with one group
// per row (the library's int8-per-row fallback).

/** The quantized dtypes the runtime reads: bytes of one block's codes, from the group size. */
export const QUANT_TYPES = {
  q8_0: { codeBytes: (group) => group, groups: (group) => Number.isInteger(group) && group >= 1 },
  q4_0: { codeBytes: (group) => group / 2, groups: (group) => group === 32 },
};

/** Which file of book/_static/models/ the site serves for each model (export_models.py's SERVED). */
export const SERVED = {
  shakespeare: "quantized/shakespeare",
  stories260k: "quantized/stories260k",
  translator: "quantized/translator",
};

/** The file a page loads for the model `name`: its quantized export where there is one. */
export function servedFile(name) {
  return SERVED[name] ?? name;
}

function half(h) {
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  const sign = h & 0x8000 ? -1 : 1;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** The stored matrix's (rows, cols) and the number of groups per row; an Error naming what is wrong. */
function layout(name, t) {
  const type = QUANT_TYPES[t.dtype];
  if (!type) throw new Error(`tensor ${name}: dtype ${t.dtype} is not a quantized type (q8_0 or q4_0)`);
  if (t.shape.length !== 2) {
    throw new Error(`tensor ${name}: a ${t.dtype} tensor must be a matrix, got shape [${t.shape}]`);
  }
  const [rows, cols] = t.transposed ? [t.shape[1], t.shape[0]] : t.shape;
  if (!type.groups(t.group)) {
    const want = t.dtype === "q4_0" ? "32" : "a positive integer";
    throw new Error(`tensor ${name}: ${t.dtype} needs a group size of ${want}, got ${JSON.stringify(t.group)}`);
  }
  if (cols % t.group) {
    throw new Error(`tensor ${name}: its group size ${t.group} does not divide its rows of ${cols} numbers`);
  }
  return { rows, cols, perRow: cols / t.group, blockBytes: 2 + type.codeBytes(t.group) };
}

/** Bytes a quantized tensor entry takes in the .bin file (checked before anything is read). */
export function quantizedBytes(name, t) {
  const { rows, perRow, blockBytes } = layout(name, t);
  return rows * perRow * blockBytes;
}

/**
 * The float32 weights (runtime layout, shape t.shape) of the quantized entry t of a .bin
 * file seen through `view` (a DataView). quantizedBytes(name, t) must have been checked
 * against the file's length first.
 */
export function dequantize(view, name, t) {
  const { rows, cols, perRow, blockBytes } = layout(name, t);
  const g = t.group;
  const out = new Float32Array(rows * cols);
  const four = t.dtype === "q4_0";
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let at = t.offset;
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < perRow; b++, at += blockBytes) {
      const d = half(view.getUint16(at, true));
      if (!Number.isFinite(d)) throw new Error(`tensor ${name}: block ${b} of row ${r} has a scale that is not finite`);
      const c0 = b * g;
      for (let j = 0; j < g; j++) {
        let q;
        if (four) {
          const byte = bytes[at + 2 + (j % 16)];
          q = (j < 16 ? byte & 0x0f : byte >> 4) - 8;
        } else {
          q = view.getInt8(at + 2 + j);
        }
        const w = Math.fround(d * q);
        // stored (row r, column c) is the runtime's (c, r) when transposed
        if (t.transposed) out[(c0 + j) * rows + r] = w;
        else out[r * cols + c0 + j] = w;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// GGUF's blocks, read in place (SmolLM2's file: Q4_1 matrices, a Q8_0 embedding)
// ---------------------------------------------------------------------------
//
// A GGUF matrix of `rows` rows of `cols` numbers is rows * cols / 32 blocks, row after row:
//
//   Q4_1, 20 bytes: float16 d, float16 m, 16 bytes qs; weight j = (qs[j] & 15) d + m and
//         weight j + 16 = (qs[j] >> 4) d + m, in float32;
//   Q8_0, 34 bytes: float16 d, 32 int8 q; weight j = q[j] d, in float32;
//   Q4_0, 18 bytes: float16 d, 16 bytes qs; weight j = ((qs[j] & 15) - 8) d, j + 16 from >> 4.
//
// dequantizeGGML gives the float32 weights, as the library's attention_lib.data.gguf_quant
// (and llama.cpp's reference code) computes them; matvecGGML is the product W x from those
// same weights, each dot product summed in double: the scalar path and the reference of
// kernels.wat's matvec_q4_1 and matvec_q8_0 (tests/js/quant-gguf.test.mjs).

/** Bytes per block of 32 numbers, by ggml type name. */
export const GGML_BLOCK_BYTES = { Q4_0: 18, Q4_1: 20, Q8_0: 34 };

let HALVES = null;
/** All 65,536 float16 values as float32, indexed by their bits (built once). */
export function halfTable() {
  if (!HALVES) {
    HALVES = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) HALVES[h] = half(h);
  }
  return HALVES;
}

function checkGGML(type, bytes, offset, rows, cols) {
  const size = GGML_BLOCK_BYTES[type];
  if (!size) throw new Error(`ggml type ${type} is not a block type the runtime reads (Q4_0, Q4_1, Q8_0)`);
  if (!(Number.isInteger(cols) && cols > 0 && cols % 32 === 0)) throw new Error(`a ${type} row must be a positive multiple of 32 numbers, got ${cols}`);
  if (!(Number.isInteger(rows) && rows > 0)) throw new Error(`rows must be a positive integer, got ${rows}`);
  const end = offset + (rows * cols / 32) * size;
  if (!(Number.isInteger(offset) && offset >= 0 && end <= bytes.length)) {
    throw new Error(`a ${type} matrix of ${rows} x ${cols} at byte ${offset} ends at byte ${end}, past the ${bytes.length} bytes given`);
  }
  return size;
}

/**
 * The float32 weights of row r of a GGUF block matrix (bytes: a Uint8Array; the matrix at
 * byte `offset`), written into out (cols floats). An embedding lookup reads one row so.
 */
export function ggmlRow(bytes, offset, type, rows, cols, r, out = new Float32Array(cols)) {
  const size = checkGGML(type, bytes, offset, rows, cols);
  const H = halfTable();
  let at = offset + r * (cols / 32) * size;
  for (let c0 = 0; c0 < cols; c0 += 32, at += size) {
    const d = H[bytes[at] | (bytes[at + 1] << 8)];
    if (type === "Q8_0") {
      for (let j = 0; j < 32; j++) out[c0 + j] = Math.fround(d * ((bytes[at + 2 + j] << 24) >> 24));
    } else if (type === "Q4_1") {
      const m = H[bytes[at + 2] | (bytes[at + 3] << 8)];
      for (let j = 0; j < 16; j++) {
        const q = bytes[at + 4 + j];
        out[c0 + j] = Math.fround(Math.fround((q & 15) * d) + m);
        out[c0 + j + 16] = Math.fround(Math.fround((q >> 4) * d) + m);
      }
    } else {
      for (let j = 0; j < 16; j++) {
        const q = bytes[at + 2 + j];
        out[c0 + j] = Math.fround(((q & 15) - 8) * d);
        out[c0 + j + 16] = Math.fround(((q >> 4) - 8) * d);
      }
    }
  }
  return out;
}

/** The float32 weights (rows x cols, row-major) of a GGUF block matrix. */
export function dequantizeGGML(bytes, offset, type, rows, cols) {
  checkGGML(type, bytes, offset, rows, cols);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) ggmlRow(bytes, offset, type, rows, cols, r, out.subarray(r * cols, (r + 1) * cols));
  return out;
}

/**
 * out (rows floats) = W x for a GGUF block matrix W (rows x cols) and x (cols floats): each
 * output the dot product of row r's float32 weights (as dequantizeGGML gives them) with x,
 * summed in double. The scalar path (no WebAssembly SIMD) and the kernels' reference.
 */
export function matvecGGML(bytes, offset, type, rows, cols, x, out = new Float32Array(rows)) {
  checkGGML(type, bytes, offset, rows, cols);
  const w = new Float32Array(cols);
  for (let r = 0; r < rows; r++) {
    ggmlRow(bytes, offset, type, rows, cols, r, w);
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (let j = 0; j < cols; j += 4) {
      s0 += w[j] * x[j];
      s1 += w[j + 1] * x[j + 1];
      s2 += w[j + 2] * x[j + 2];
      s3 += w[j + 3] * x[j + 3];
    }
    out[r] = s0 + s1 + (s2 + s3);
  }
  return out;
}
