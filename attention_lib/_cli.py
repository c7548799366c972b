"""What the library's command lines share: argument types and the exit status on a closed pipe."""

import argparse

#: Exit status when the reader of a command's output goes away (``... | head -1``):
#: 128 + SIGPIPE, what a shell reports for a Unix tool stopped by the pipe.
EXIT_BROKEN_PIPE = 141


def int_at_least(low):
    """An ``argparse`` type: an integer ``>= low``, else a one-line message naming the value.

    >>> int_at_least(1)("3")
    3
    >>> int_at_least(1)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive integer (1, 2, ...), got '0'
    """
    what = (
        "a positive integer (1, 2, ...)"
        if low == 1
        else f"an integer >= {low} ({', '.join(str(low + i) for i in range(3))}, ...)"
    )

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return parse
