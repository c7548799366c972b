"""Write text with one of the book's trained models: ``python -m attention_lib.generate``.

::

    python -m attention_lib.generate --model shakespeare --prompt "ROMEO:" \\
        --max-new-tokens 200 --temperature 0.8 --top-k 20 --seed 1
    python -m attention_lib.generate --model stories260k --prompt "Once upon a time" \\
        --max-new-tokens 100 --temperature 0        # greedy
    python -m attention_lib.generate --model smollm2 --chat \\
        --prompt "What is attention in a Transformer?" --max-new-tokens 120 --temperature 0

It prints the prompt, then the continuation, written and flushed piece by piece.
``--temperature 0`` always takes the most likely token (greedy); otherwise each token
is sampled from the model's distribution divided by the temperature, optionally cut to
the ``--top-k`` most likely tokens and to the smallest set whose probability reaches
``--top-p`` (nucleus sampling), with ``--seed`` for repeatable runs.

**Chat.** ``--chat`` (smollm2) wraps the prompt in the model's chat template as one
user turn, after the template's default system prompt, prints the prompt and then the
model's answer, and stops at the end of its turn (``<|im_end|>``) or after
``--max-new-tokens``.

**The context.** A model reads at most ``max_len`` tokens (128 characters for
shakespeare, 512 tokens for stories260k, 8,192 for smollm2). A prompt longer than that is accepted and
printed whole, but the model sees only its last ``max_len`` tokens; a message on
standard error says so. Generation past ``max_len`` crops the context as the library's
``generate(..., crop=True)`` does (and the browser's runtime, token for token): when the
context is full, its last ``max_len // 2`` tokens are read again at positions
``0 .. max_len // 2 - 1`` and writing goes on, so 1,000 characters past the context take
seconds. ``--no-crop`` refuses a prompt and ``--max-new-tokens`` that do not fit in
``max_len`` instead.

Every argument, and the prompt against the model's vocabulary, is checked before the
model runs: a bad one gives a one-line message on standard error and exit status 2
(a missing or altered model file, status 1). Piped into ``head`` it stops quietly.
"""

import argparse
import itertools
import math
import sys

import numpy as np
from threadpoolctl import threadpool_limits

from ._cli import int_at_least, write_flushed
from .data.paths import DataFileError
from .models.pretrained import MODELS, load_pretrained

#: New tokens decoded and written together (the tokenizer may join tokens, so the
#: text of a piece is what the whole text gains).
CHUNK = 32


def _number(what, ok):
    """An ``argparse`` type: a finite float for which ``ok(value)``, else "must be ``what``"."""

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return parse


_temperature = _number(">= 0 (0 is greedy, 1 the model's own distribution)", lambda t: t >= 0)
_top_p = _number("a probability in (0, 1] (1 keeps every token)", lambda p: 0 < p <= 1)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.generate",
        description="Continue a prompt with one of the book's trained language models "
        "(chapter 11's character-level Shakespeare, chapter 12's stories260K) "
        "and print the prompt followed by the continuation.",
    )
    parser.add_argument(
        "--model",
        required=True,
        choices=MODELS,
        help="which model: shakespeare (one token per character), "
        "stories260k (Llama, 512 SentencePiece tokens) or smollm2 (SmolLM2-135M-Instruct, "
        "49,152 byte-level BPE tokens)",
    )
    parser.add_argument(
        "--prompt",
        default="",
        metavar="TEXT",
        help="the text to continue (default: empty, which stories260k "
        "starts from its start token; shakespeare needs a prompt)",
    )
    parser.add_argument(
        "--max-new-tokens",
        required=True,
        type=int_at_least(0),
        metavar="N",
        help="how many tokens to add (characters for shakespeare)",
    )
    parser.add_argument(
        "--temperature",
        type=_temperature,
        default=1.0,
        metavar="T",
        help="0 is greedy; below 1 sharper, above 1 flatter (default 1)",
    )
    parser.add_argument(
        "--top-k",
        type=int_at_least(1),
        default=None,
        metavar="K",
        help="sample only among the K most likely tokens",
    )
    parser.add_argument(
        "--top-p",
        type=_top_p,
        default=None,
        metavar="P",
        help="sample only among the most likely tokens whose probabilities "
        "add up to P (nucleus sampling)",
    )
    parser.add_argument(
        "--no-crop",
        dest="crop",
        action="store_false",
        help="refuse a prompt plus --max-new-tokens longer than the model's context "
        "(by default the context is cropped to its last tokens and writing goes on)",
    )
    parser.add_argument(
        "--seed",
        type=int_at_least(0),
        default=None,
        metavar="S",
        help="seed of the sampler, for repeatable output (default: fresh)",
    )
    parser.add_argument(
        "--chat",
        action="store_true",
        help="smollm2: the prompt is a user's message in the chat template; "
        "stop at the end of the model's turn",
    )
    parser.add_argument(
        "--draft",
        default=None,
        metavar="NAME",
        help="speculative decoding with the draft NAME (ngram or one-layer: the serving "
        "chapter's, for shakespeare; lookup: prompt lookup): the same text when greedy",
    )
    return parser


def continue_text(
    model,
    tokens,
    max_new_tokens,
    temperature=1.0,
    top_k=None,
    top_p=None,
    rng=None,
    crop=True,
    stop=None,
):
    """Yield the new tokens in pieces of at most :data:`CHUNK`, cropping the context past ``max_len``.

    ``tokens`` (1-D ints) is the whole prompt; the model reads its last
    ``max_len`` tokens. The tokens are those of ``model.generate(tokens,
    max_new_tokens, ..., crop=crop)`` (one KV cache, the same draws), up to
    and without the first ``stop`` token, if one is given.
    """
    from .models.gpt import check_generation, stream_tokens

    seq = check_generation(model, tokens, max_new_tokens, temperature, top_k, top_p, rng, crop)
    from .models.llama import Llama

    float64 = isinstance(model, Llama)  # as Llama.generate: sampled from float64 logits
    piece = []
    for nxt in stream_tokens(
        model, seq, max_new_tokens, temperature, top_k, top_p, rng, True, float64, crop
    ):
        if stop is not None and int(nxt[0]) == stop:
            break
        piece.append(int(nxt[0]))
        if len(piece) == CHUNK:
            yield np.array(piece)
            piece = []
    if piece:
        yield np.array(piece)


def main(argv=None, stdout=None, stderr=None):
    """Run the command line (see :mod:`attention_lib.generate`); returns the exit status."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.model == "minilm":
        parser.error("--model minilm is a sentence encoder: it embeds text but writes none")
    if args.chat and args.model != "smollm2":
        parser.error(f"--chat: {args.model} has no chat template (smollm2 has one)")
    if args.chat and args.draft is not None:
        parser.error("--chat and --draft: speculative decoding writes plain continuations")
    if args.model == "shakespeare" and not args.prompt:
        parser.error(
            "--prompt is empty: the shakespeare model needs at least one character "
            "to start from, e.g. --prompt 'ROMEO:'"
        )
    try:
        model, tokenizer = load_pretrained(args.model)
    except DataFileError as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    # One token at a time, the products are small: one BLAS thread is fastest,
    # and a second only spins when the machine is busy.
    with threadpool_limits(limits=1, user_api="blas"):
        return _write(parser, args, model, tokenizer, stdout, stderr)


def _write(parser, args, model, tokenizer, stdout, stderr):
    try:
        text = tokenizer.chat(args.prompt) if args.chat else args.prompt
        prompt_ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
    except ValueError as err:
        parser.error(f"--prompt: {err}")
    if len(prompt_ids) == 0:
        parser.error("--prompt encodes to no tokens: give some text to continue")
    W = model.max_len
    if not args.crop and len(prompt_ids) + args.max_new_tokens > W:
        parser.error(
            f"--no-crop: the prompt ({len(prompt_ids)} tokens) + --max-new-tokens "
            f"({args.max_new_tokens}) exceeds the model's context of {W} tokens"
        )
    if len(prompt_ids) > W:
        print(
            f"{parser.prog}: note: the prompt is {len(prompt_ids)} tokens long; the "
            f"model reads at most {W}, so it continues from the last {W}",
            file=stderr,
        )
    rng = np.random.default_rng(args.seed)
    pieces = continue_text(
        model,
        prompt_ids,
        args.max_new_tokens,
        args.temperature,
        args.top_k,
        args.top_p,
        rng,
        args.crop,
        tokenizer.eos_id if args.chat else None,
    )
    if args.draft is not None:  # the serving chapter's speculative decoding
        from .models.speculative import draft_pieces

        pieces = draft_pieces(parser, args, model, prompt_ids[-W:], rng, continue_text)
    try:  # the first piece: a temperature the logits cannot be divided by fails here
        first = next(pieces, None)
    except ValueError as err:
        parser.error(f"--temperature: {err}")
    rest = [] if first is None else itertools.chain([first], pieces)
    try:
        shown = args.prompt + "\n" if args.chat else args.prompt
        return write_flushed(stdout, _texts(tokenizer, shown, prompt_ids, rest))
    except ValueError as err:  # a later step's logits overflowed the division
        stdout.write("\n")
        parser.error(f"--temperature: {err}")


def _texts(tokenizer, prompt, prompt_ids, pieces):
    """The prompt, then the text each piece of new tokens adds, then a newline."""
    so_far = tokenizer.decode(prompt_ids)
    ids = list(prompt_ids)
    yield prompt
    for new in pieces:
        ids.extend(int(i) for i in new)
        # Decode the whole text and give what is new: a tokenizer may
        # join tokens (a leading space, the bytes of one character).
        text = tokenizer.decode(ids)
        if text.startswith(so_far):
            yield text[len(so_far) :]
            so_far = text
    yield "\n"


if __name__ == "__main__":
    sys.exit(main())
