// all-MiniLM-L6-v2 in the browser: BERT's WordPiece tokenizer and the encoder's forward
// pass (post-LN blocks, bidirectional attention, exact GELU, mean pooling, L2 norm), on
// the int8-per-row weights that scripts/export_minilm.py writes (minilm.json + minilm.bin).
// The same maths as attention_lib.models.minilm; tests/js/minilm.test.mjs checks the tokens
// and the embeddings against the NumPy library's on the same dequantized weights.
//
//   import { loadEncoder } from "./encoder.mjs";
//   const enc = loadEncoder(manifest, arrayBuffer);
//   enc.tokenize("Hello, world!")   // ["[CLS]", "hello", ",", "world", "!", "[SEP]"]
//   enc.encode("Hello, world!")     // Float32Array(384), length 1
//   enc.attention("Hello, world!")  // { tokens, weights[layer][head]: Float32Array(T * T), embedding, truncated }

const FORMAT = "attention-from-scratch runtime encoder, version 1";

function isPunctuation(ch) {
  const cp = ch.codePointAt(0);
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126)) return true;
  return /\p{P}/u.test(ch);
}

function isCJK(cp) {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) || (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f);
}

// Unicode's White_Space property (Rust's char::is_whitespace, which the library's
// tokenizers use): tab, newline and return, the Zs spaces, U+0085 and the line and
// paragraph separators U+2028 and U+2029 (JavaScript's \s has U+FEFF instead of U+0085).
const WHITE_SPACE = /[\t\n\v\f\r\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
// What the library's normalizer drops: NUL, U+FFFD and the "other" characters but tab,
// newline and return (controls, format, private use; surrogates, which a JavaScript string
// may hold alone). Unassigned code points (Cn) are kept, as the library keeps them.
const DROPPED = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\ufffd]/u;

/**
 * BERT's basic tokenizer, in the order of the library's (Hugging Face tokenizers'
 * BertNormalizer, then BertPreTokenizer): drop controls, spaces for white space, space out
 * CJK, strip accents (NFD, then no Mn), lowercase one code point at a time (a capital
 * sigma is always "σ", never the final "ς" that lowercasing a whole word would give),
 * split on white space and around punctuation.
 */
export function basicTokenize(text) {
  let cleaned = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (ch === "\t" || ch === "\n" || ch === "\r") cleaned += " ";
    else if (DROPPED.test(ch)) continue;
    else if (WHITE_SPACE.test(ch)) cleaned += " ";
    else if (isCJK(cp)) cleaned += ` ${ch} `;
    else cleaned += ch;
  }
  let lowered = "";
  for (const ch of cleaned.normalize("NFD").replace(/\p{Mn}/gu, "")) lowered += ch.toLowerCase();
  const words = [];
  for (const word of lowered.split(" ")) {
    if (!word) continue;
    let current = "";
    for (const ch of word) {
      if (isPunctuation(ch)) {
        if (current) words.push(current);
        words.push(ch);
        current = "";
      } else current += ch;
    }
    if (current) words.push(current);
  }
  return words;
}

/** Greedy longest-match-first word pieces of one word ("##" inside a word); ["[UNK]"] if none fits. */
export function wordPieces(word, vocab) {
  const chars = Array.from(word);
  if (chars.length > 100) return ["[UNK]"];
  const out = [];
  let start = 0;
  while (start < chars.length) {
    let end = chars.length;
    let piece = null;
    while (end > start) {
      const candidate = (start ? "##" : "") + chars.slice(start, end).join("");
      if (vocab.has(candidate)) {
        piece = candidate;
        break;
      }
      end -= 1;
    }
    if (piece === null) return ["[UNK]"];
    out.push(piece);
    start = end;
  }
  return out;
}

// erf to about 1e-7 (Abramowitz and Stegun 7.1.26 is 1.5e-7; this is their 7.1.28-style
// rational form refined): good for GELU within the float32 parity tolerance.
function erf(x) {
  const sign = x < 0 ? -1 : 1;
  const a = Math.abs(x);
  const t = 1 / (1 + 0.5 * a);
  const y = 1 - t * Math.exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 +
    t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 +
    t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return sign * y;
}

export function loadEncoder(manifest, buffer) {
  if (manifest.format !== FORMAT) {
    throw new Error(`not an encoder export: format is ${JSON.stringify(manifest.format)}`);
  }
  const bytes = buffer instanceof ArrayBuffer ? buffer : buffer.buffer.slice(
    buffer.byteOffset, buffer.byteOffset + buffer.byteLength);
  if (bytes.byteLength !== manifest.bytes) {
    throw new Error(`minilm.bin has ${bytes.byteLength} bytes, the manifest says ${manifest.bytes}`);
  }
  const t = {};
  for (const e of manifest.tensors) {
    const n = e.shape.reduce((a, b) => a * b, 1);
    t[e.name] = e.kind === "int8-rows"
      ? { q: new Int8Array(bytes, e.offset, n), s: new Float32Array(bytes, e.scales_offset, e.shape[0]),
          rows: e.shape[0], cols: e.shape[1] }
      : new Float32Array(bytes, e.offset, n);
  }
  const c = manifest.config;
  const E = c.d_model, H = c.n_heads, D = E / H, maxTokens = c.max_tokens;
  const vocab = new Map(manifest.vocab.map((p, i) => [p, i]));

  function allPieces(text) {
    if (typeof text !== "string") throw new TypeError("text must be a string");
    const pieces = [];
    for (const w of basicTokenize(text)) pieces.push(...wordPieces(w, vocab));
    if (pieces.length === 0) throw new Error("the text has no word piece (empty, or only spaces)");
    return pieces;
  }

  /** [CLS], the word pieces (the first max_tokens - 2: longer text is cut), [SEP]. */
  function tokenize(text) {
    return ["[CLS]", ...allPieces(text).slice(0, maxTokens - 2), "[SEP]"];
  }

  function row(table, i) { // a dequantized row of an int8 table
    const out = new Float32Array(table.cols);
    const s = table.s[i];
    for (let j = 0; j < table.cols; j++) out[j] = table.q[i * table.cols + j] * s;
    return out;
  }

  // x (T, in) @ W^T + b, W int8 (out, in) rows. Two rows of x at a time, so that each
  // weight read serves both, and four accumulators per row (the same sums for a row
  // whether or not it has a partner: the pairing changes no bit).
  function linear(x, T, W, b) {
    const { q, s: scale, rows, cols: n } = W;
    const out = new Float32Array(T * rows);
    const n4 = n - (n % 4);
    for (let t = 0; t < T; t += 2) {
      const xa = t * n;
      const pair = t + 1 < T;
      const xb = pair ? xa + n : xa;
      for (let o = 0; o < rows; o++) {
        const wo = o * n;
        let a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
        let i = 0;
        for (; i < n4; i += 4) {
          const w0 = q[wo + i], w1 = q[wo + i + 1], w2 = q[wo + i + 2], w3 = q[wo + i + 3];
          a0 += x[xa + i] * w0; a1 += x[xa + i + 1] * w1; a2 += x[xa + i + 2] * w2; a3 += x[xa + i + 3] * w3;
          b0 += x[xb + i] * w0; b1 += x[xb + i + 1] * w1; b2 += x[xb + i + 2] * w2; b3 += x[xb + i + 3] * w3;
        }
        for (; i < n; i++) { a0 += x[xa + i] * q[wo + i]; b0 += x[xb + i] * q[wo + i]; }
        out[t * rows + o] = ((a0 + a1) + (a2 + a3)) * scale[o] + b[o];
        if (pair) out[(t + 1) * rows + o] = ((b0 + b1) + (b2 + b3)) * scale[o] + b[o];
      }
    }
    return out;
  }

  function layerNorm(x, T, gamma, beta) {
    for (let t = 0; t < T; t++) {
      let mean = 0, v = 0;
      for (let i = 0; i < E; i++) mean += x[t * E + i];
      mean /= E;
      for (let i = 0; i < E; i++) { const d = x[t * E + i] - mean; v += d * d; }
      const inv = 1 / Math.sqrt(v / E + c.eps);
      for (let i = 0; i < E; i++) x[t * E + i] = (x[t * E + i] - mean) * inv * gamma[i] + beta[i];
    }
    return x;
  }

  function forward(ids, keepWeights) {
    const T = ids.length;
    let x = new Float32Array(T * E);
    const seg = row(t["seg.E"], 0);
    for (let p = 0; p < T; p++) {
      const tk = row(t["tok.E"], ids[p]), ps = row(t["pos.E"], p);
      for (let i = 0; i < E; i++) x[p * E + i] = tk[i] + ps[i] + seg[i];
    }
    layerNorm(x, T, t["emb_norm.gamma"], t["emb_norm.beta"]);
    const weights = [];
    for (let l = 0; l < c.n_layers; l++) {
      const p = (k) => t[`blocks.${l}.${k}`];
      const q = linear(x, T, p("attn.W_Q"), p("attn.b_Q"));
      const k = linear(x, T, p("attn.W_K"), p("attn.b_K"));
      const v = linear(x, T, p("attn.W_V"), p("attn.b_V"));
      const ctx = new Float32Array(T * E);
      const layerWeights = [];
      const scale = 1 / Math.sqrt(D);
      for (let h = 0; h < H; h++) {
        const w = new Float32Array(T * T);
        for (let i = 0; i < T; i++) {
          let max = -Infinity;
          for (let j = 0; j < T; j++) {
            let s = 0;
            for (let d = 0; d < D; d++) s += q[i * E + h * D + d] * k[j * E + h * D + d];
            w[i * T + j] = s * scale;
            if (w[i * T + j] > max) max = w[i * T + j];
          }
          let total = 0;
          for (let j = 0; j < T; j++) { w[i * T + j] = Math.exp(w[i * T + j] - max); total += w[i * T + j]; }
          for (let j = 0; j < T; j++) w[i * T + j] /= total;
          for (let d = 0; d < D; d++) {
            let s = 0;
            for (let j = 0; j < T; j++) s += w[i * T + j] * v[j * E + h * D + d];
            ctx[i * E + h * D + d] = s;
          }
        }
        if (keepWeights) layerWeights.push(w);
      }
      if (keepWeights) weights.push(layerWeights);
      const a = linear(ctx, T, p("attn.W_O"), p("attn.b_O"));
      for (let i = 0; i < T * E; i++) a[i] += x[i];
      x = layerNorm(a, T, p("attn_norm.gamma"), p("attn_norm.beta"));
      const hdn = linear(x, T, p("ffn.fc1.W"), p("ffn.fc1.b"));
      for (let i = 0; i < hdn.length; i++) hdn[i] = 0.5 * hdn[i] * (1 + erf(hdn[i] * Math.SQRT1_2));
      const f = linear(hdn, T, p("ffn.fc2.W"), p("ffn.fc2.b"));
      for (let i = 0; i < T * E; i++) f[i] += x[i];
      x = layerNorm(f, T, p("ffn_norm.gamma"), p("ffn_norm.beta"));
    }
    return { x, weights };
  }

  function ids(tokens) {
    return tokens.map((p) => vocab.get(p));
  }

  function pool(x, T) { // mean over the tokens, then L2-normalised
    const out = new Float32Array(E);
    for (let p = 0; p < T; p++) for (let i = 0; i < E; i++) out[i] += x[p * E + i] / T;
    let norm = 0;
    for (let i = 0; i < E; i++) norm += out[i] * out[i];
    norm = Math.max(Math.sqrt(norm), 1e-12);
    for (let i = 0; i < E; i++) out[i] /= norm;
    return out;
  }

  function encode(text) {
    const tokens = tokenize(text);
    return pool(forward(ids(tokens), false).x, tokens.length);
  }

  /** The tokens, every layer's and head's weights, and the embedding, in one forward pass. */
  function attention(text) {
    const pieces = allPieces(text);
    const tokens = ["[CLS]", ...pieces.slice(0, maxTokens - 2), "[SEP]"];
    const { x, weights } = forward(ids(tokens), true);
    return { tokens, weights, embedding: pool(x, tokens.length), truncated: pieces.length > maxTokens - 2 };
  }

  function similarity(a, b) {
    const ea = encode(a), eb = encode(b);
    let s = 0;
    for (let i = 0; i < E; i++) s += ea[i] * eb[i];
    return s;
  }

  return { tokenize, encode, attention, similarity, config: c, quantization: manifest.quantization };
}
