"""Write text with one of the book's trained models: ``python -m attention_lib.generate``.

::

    python -m attention_lib.generate --model shakespeare --prompt "ROMEO:" \\
        --max-new-tokens 200 --temperature 0.8 --top-k 20 --seed 1
    python -m attention_lib.generate --model stories260k --prompt "Once upon a time" \\
        --max-new-tokens 100 --temperature 0        # greedy

It prints the prompt, then the continuation, written and flushed piece by piece.
``--temperature 0`` always takes the most likely token (greedy); otherwise each token
is sampled from the model's distribution divided by the temperature, optionally cut to
the ``--top-k`` most likely tokens and to the smallest set whose probability reaches
``--top-p`` (nucleus sampling), with ``--seed`` for repeatable runs.

**The context.** A model reads at most ``max_len`` tokens (128 characters for
shakespeare, 512 tokens for stories260k). A prompt longer than that is accepted and
printed whole, but the model sees only its last ``max_len - 1`` tokens (one position is
kept free for the first new token); a message on standard error says so. Generation
past ``max_len`` slides the window as nanoGPT does: each further token is predicted
from the last ``max_len - 1`` tokens, recomputed in full (the KV cache holds positions,
and the window's positions change at every step), so those tokens cost more each.

Every argument, and the prompt against the model's vocabulary, is checked before the
model runs: a bad one gives a one-line message on standard error and exit status 2
(a missing or altered model file, status 1). Piped into ``head`` it stops quietly.
"""

import argparse
import math
import sys

import numpy as np
from threadpoolctl import threadpool_limits

from ._cli import int_at_least, write_flushed
from .data.paths import DataFileError
from .models.pretrained import MODELS, load_pretrained

#: Tokens generated per call of ``model.generate`` while the context has room:
#: each call starts a new KV cache, so the pieces are as long as the room allows.
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
        "(chapter 12's character-level Shakespeare, chapter 13's stories260K) "
        "and print the prompt followed by the continuation.",
    )
    parser.add_argument(
        "--model",
        required=True,
        choices=MODELS,
        help="which model: shakespeare (one token per character) or "
        "stories260k (Llama, 512 SentencePiece tokens)",
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
        "--seed",
        type=int_at_least(0),
        default=None,
        metavar="S",
        help="seed of the sampler, for repeatable output (default: fresh)",
    )
    parser.add_argument(
        "--draft",
        default=None,
        metavar="NAME",
        help="speculative decoding with the draft model NAME (one-layer: the serving "
        "chapter's, for shakespeare): the same text when greedy, faster",
    )
    return parser


def continue_text(model, tokens, max_new_tokens, temperature=1.0, top_k=None, top_p=None, rng=None):
    """Yield the new tokens in pieces, sliding the context window when it is full.

    ``tokens`` (1-D ints) is the prompt as the model will read it: at most
    ``max_len - 1`` tokens. While the context has room, each piece comes from
    one ``model.generate`` call (one KV cache); after that each token is
    predicted from the last ``max_len - 1`` tokens.
    """
    seq = np.asarray(tokens, dtype=np.int64)
    left = max_new_tokens
    while left > 0:
        room = model.max_len - len(seq)
        if room > 1:
            context, n = seq, min(left, room, CHUNK)
        else:  # full: slide, one token at a time
            context, n = seq[-(model.max_len - 1) :], 1
        out = model.generate(context, n, temperature=temperature, top_k=top_k, top_p=top_p, rng=rng)
        new = np.asarray(out)[len(context) :]
        seq = np.concatenate([seq, new])
        left -= n
        yield new


def main(argv=None, stdout=None, stderr=None):
    """Run the command line (see :mod:`attention_lib.generate`); returns the exit status."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    parser = build_parser()
    args = parser.parse_args(argv)
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
        prompt_ids = np.asarray(tokenizer.encode(args.prompt), dtype=np.int64)
    except ValueError as err:
        parser.error(f"--prompt: {err}")
    if len(prompt_ids) == 0:
        parser.error("--prompt encodes to no tokens: give some text to continue")
    limit = model.max_len - 1
    context = prompt_ids
    if len(prompt_ids) > limit:
        context = prompt_ids[-limit:]
        print(
            f"{parser.prog}: note: the prompt is {len(prompt_ids)} tokens long; the "
            f"model reads at most {model.max_len}, so it continues from the last {limit}",
            file=stderr,
        )
    rng = np.random.default_rng(args.seed)
    pieces = continue_text(
        model, context, args.max_new_tokens, args.temperature, args.top_k, args.top_p, rng
    )
    if args.draft is not None:  # the serving chapter's speculative decoding
        from .models.speculative import draft_pieces

        pieces = draft_pieces(parser, args, model, context, rng, continue_text)
    return write_flushed(stdout, _texts(tokenizer, args.prompt, prompt_ids, pieces))


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
