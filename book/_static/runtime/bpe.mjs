// bpe.mjs: SmolLM2's tokenizer, byte-level BPE (GPT-2's scheme), read from the model's GGUF
// file, giving the ids of the library's attention_lib.data.bpe_tokenizer (Hugging Face's
// `tokenizers`) on every text (tests/js/bpe.test.mjs). Text becomes ids in four steps:
//
//   1. special tokens (the vocabulary's control tokens, token_type 3: <|im_start|>,
//      <|im_end|>, <|endoftext|>) are found whole in the text first, leftmost and longest:
//      each is one id, and no merge crosses them;
//   2. every numeric character (\p{N}) is cut out on its own ("smollm": the digits of a
//      number are tokens one by one);
//   3. the rest is split with GPT-2's pattern: contractions, a word with the space before
//      it, a number, a run of other symbols, runs of spaces;
//   4. each piece's UTF-8 bytes become GPT-2's printable symbols (a space is "Ġ") and the
//      merges join adjacent symbols, the best-ranked pair first (the leftmost on a tie),
//      until no pair of neighbours is a merge; each symbol left is a token.
//
// "Space" is Unicode's White_Space, as in the Rust regex engine the library uses; JavaScript's
// \s differs (it holds U+FEFF and lacks U+0085), so the pattern spells the class out.

import { mergeByRank } from "./transformer.mjs";

/** Unicode's White_Space characters (the Rust and Oniguruma \s). */
const WS = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
/** GPT-2's pre-tokenizer pattern with White_Space for \s. */
const GPT2 = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  "gu",
);
/** A numeric character (Rust's char::is_numeric: Nd, Nl, No), for "smollm"'s digit split. */
const NUMERIC = /\p{N}/gu;

/** GPT-2's map from each byte to a printable character, and back (a space is "Ġ"). */
export function byteSymbols() {
  const keep = (b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const toChar = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) toChar[b] = String.fromCodePoint(keep(b) ? b : 256 + extra++);
  return { toChar, toByte: new Map(toChar.map((c, b) => [c, b])) };
}

const CONTROL = 3; // tokenizer.ggml.token_type of a special token

/** SmolLM2's tokenizer: byte-level BPE with its merges, digits split, special tokens whole. */
export class ByteBPETokenizer {
  /**
   * tokens: the vocabulary in id order (GPT-2's symbols); merges: "left right", best first;
   * special: the ids matched whole; pre: "smollm" (digits split) or "gpt2".
   */
  constructor({ tokens, merges, special = [], pre = "smollm", bosId = null, eosId = null, chatTemplate = null }) {
    if (!Array.isArray(tokens) || tokens.length === 0) throw new Error("tokens must be a non-empty array of strings");
    if (!Array.isArray(merges)) throw new Error("merges must be an array of strings");
    if (pre !== "smollm" && pre !== "gpt2") throw new Error(`pre must be "smollm" or "gpt2", got ${JSON.stringify(pre)}`);
    this.tokens = tokens;
    this.vocab = new Map(tokens.map((t, i) => [t, i]));
    if (this.vocab.size !== tokens.length) throw new Error("tokens holds the same token twice: each must have one id");
    this.ranks = new Map();
    merges.forEach((m, r) => {
      const parts = typeof m === "string" ? m.split(" ") : [];
      if (parts.length !== 2 || !parts[0] || !parts[1] || !this.vocab.has(parts[0] + parts[1])) {
        throw new Error(`merge ${r} (${JSON.stringify(m)}) is not two symbols whose join is in the vocabulary`);
      }
      this.ranks.set(m, r);
    });
    this.pre = pre;
    this.special = [...new Set(special)].sort((a, b) => a - b);
    for (const id of this.special) {
      if (!(Number.isInteger(id) && id >= 0 && id < tokens.length)) throw new Error(`special ids must be token ids below ${tokens.length}, got ${id}`);
    }
    this.specialIds = new Set(this.special);
    // longest first: at one position the alternation then takes the longest special token
    const names = this.special.map((i) => tokens[i]).sort((a, b) => b.length - a.length);
    this.specialRe = names.length ? new RegExp(names.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g") : null;
    this.bosId = bosId;
    this.eosId = eosId;
    this.chatTemplate = chatTemplate;
    this.bytes = byteSymbols();
    this.encoder = new TextEncoder();
    this.decoder = new TextDecoder("utf-8", { ignoreBOM: true }); // a leading U+FEFF is text, kept
    this.cache = new Map();
  }

  /** The tokenizer stored in a GGUF file's metadata (gguf.mjs's readGGUF(...).metadata). */
  static fromGGUF(metadata, what = "the GGUF file") {
    const model = metadata["tokenizer.ggml.model"];
    if (model !== "gpt2") throw new Error(`${what}: tokenizer.ggml.model is ${JSON.stringify(model)}; this tokenizer reads byte-level BPE ("gpt2")`);
    for (const key of ["tokenizer.ggml.tokens", "tokenizer.ggml.merges"]) {
      if (!Array.isArray(metadata[key])) throw new Error(`${what}: ${key} is missing or not an array of strings`);
    }
    const tokens = metadata["tokenizer.ggml.tokens"];
    const types = metadata["tokenizer.ggml.token_type"] ?? tokens.map(() => 1);
    if (types.length !== tokens.length) throw new Error(`${what}: tokenizer.ggml.token_type has not one type per token`);
    const special = [];
    types.forEach((t, i) => t === CONTROL && special.push(i));
    try {
      return new ByteBPETokenizer({
        tokens,
        merges: metadata["tokenizer.ggml.merges"],
        special,
        pre: metadata["tokenizer.ggml.pre"] ?? "gpt2",
        bosId: metadata["tokenizer.ggml.bos_token_id"] ?? null,
        eosId: metadata["tokenizer.ggml.eos_token_id"] ?? null,
        chatTemplate: metadata["tokenizer.chat_template"] ?? null,
      });
    } catch (err) {
      throw new Error(`${what}: ${err.message}`);
    }
  }

  get nVocab() {
    return this.tokens.length;
  }

  /** The pieces no merge crosses, of a text without special tokens (steps 2 and 3). */
  words(text) {
    const out = [];
    const split = (s) => {
      for (const m of s.matchAll(GPT2)) out.push(m[0]);
    };
    if (this.pre !== "smollm") {
      split(text);
      return out;
    }
    let from = 0;
    for (const m of text.matchAll(NUMERIC)) {
      if (m.index > from) split(text.slice(from, m.index));
      out.push(m[0]);
      from = m.index + m[0].length;
    }
    if (from < text.length) split(text.slice(from));
    return out;
  }

  /** The ids of one piece: its bytes as symbols, merged best rank first (step 4). */
  bpe(word) {
    const hit = this.cache.get(word);
    if (hit) return hit;
    const { toChar } = this.bytes;
    // a byte whose symbol the vocabulary lacks (0x1D's) is dropped before merging, as the
    // library drops it: its neighbours then meet ("!\x1d!" is "!!")
    const parts = [];
    for (const b of this.encoder.encode(word)) if (this.vocab.has(toChar[b])) parts.push(toChar[b]);
    mergeByRank(parts, this.ranks);
    const ids = parts.map((p) => this.vocab.get(p));
    if (this.cache.size < 100000) this.cache.set(word, ids);
    return ids;
  }

  /** The ids of `text`; special tokens written in it are one id each. No start token is added. */
  encode(text) {
    if (typeof text !== "string") throw new TypeError(`text must be a string, got ${typeof text}`);
    const lone = text.search(/\p{Surrogate}/u);
    if (lone >= 0) {
      const hex = text.charCodeAt(lone).toString(16).toUpperCase();
      throw new RangeError(`text has a lone surrogate (U+${hex} at index ${lone}), which no UTF-8 byte sequence spells`);
    }
    const ids = [];
    const plain = (s) => {
      for (const w of this.words(s)) for (const id of this.bpe(w)) ids.push(id);
    };
    let from = 0;
    if (this.specialRe) {
      for (const m of text.matchAll(this.specialRe)) {
        if (m.index > from) plain(text.slice(from, m.index));
        ids.push(this.vocab.get(m[0]));
        from = m.index + m[0].length;
      }
    }
    if (from < text.length) plain(text.slice(from));
    return ids;
  }

  /** The text of `ids` (special tokens written out); a cut UTF-8 sequence ends in U+FFFD. */
  decode(ids) {
    const bytes = [];
    const { toByte } = this.bytes;
    for (const id of ids) {
      if (!(Number.isInteger(id) && id >= 0 && id < this.tokens.length)) {
        throw new RangeError(`ids must be integers in [0, ${this.tokens.length}), got ${id}`);
      }
      const t = this.tokens[id];
      if (this.specialIds.has(id)) {
        for (const b of this.encoder.encode(t)) bytes.push(b);
        continue;
      }
      for (const ch of t) {
        const b = toByte.get(ch);
        if (b === undefined) for (const x of this.encoder.encode(ch)) bytes.push(x);
        else bytes.push(b);
      }
    }
    return this.decoder.decode(new Uint8Array(bytes));
  }

  /** Text one token at a time: push(id) -> the new text that is complete (no cut character). */
  streamDecoder() {
    const ids = [];
    let shown = "";
    return {
      push: (id) => {
        ids.push(id);
        const text = this.decode(ids);
        if (text.endsWith("\ufffd")) return ""; // wait for the rest of a character
        const fresh = text.startsWith(shown) ? text.slice(shown.length) : "";
        shown = text;
        return fresh;
      },
      flush: () => {
        const text = this.decode(ids);
        const fresh = text.startsWith(shown) ? text.slice(shown.length) : "";
        shown = text;
        return fresh;
      },
    };
  }

  /** The vocabulary's spelling of an id ("Ġthe"), for showing tokens. */
  piece(id) {
    return this.tokens[id];
  }

  /**
   * SmolLM2's chat template for a list of {role, content} messages (or one user prompt):
   * "<|im_start|>role\ncontent<|im_end|>\n" per message, the default system message first when
   * there is none, and, with addGenerationPrompt, "<|im_start|>assistant\n" where the answer
   * starts. (The GGUF's Jinja template, written out: tests/js/bpe.test.mjs checks it against
   * the library's rendering.)
   */
  chat(messages, addGenerationPrompt = true) {
    if (typeof messages === "string") messages = [{ role: "user", content: messages }];
    if (!Array.isArray(messages)) throw new TypeError("messages must be a string or an array of {role, content}");
    messages.forEach((m, i) => {
      if (!(m && typeof m.role === "string" && typeof m.content === "string")) {
        throw new TypeError(`messages[${i}] must be an object with string role and content`);
      }
    });
    let s = "";
    if (messages.length && messages[0].role !== "system") {
      s += "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
    }
    for (const m of messages) s += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
    if (addGenerationPrompt) s += "<|im_start|>assistant\n";
    return s;
  }
}
