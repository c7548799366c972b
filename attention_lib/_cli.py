"""What the library's command lines share: argument types, reading UTF-8 input, writing output."""

import argparse
import os

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


def int_in(low, high):
    """An ``argparse`` type: an integer in ``[low, high]``, else a one-line message.

    >>> int_in(1, 64)("100000")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer from 1 to 64, got '100000'
    """
    at_least = int_at_least(low)

    def parse(text):
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {low} to {high}, got {text!r}"
            )
        return value

    return parse


def read_text(parser, path, stdin, flag=None):
    """The text of a file, or of ``stdin`` for ``-``, decoded as UTF-8 (a byte-order mark dropped).

    A missing file, a directory or bytes that are not UTF-8 end the command through
    ``parser.error`` (one line, exit status 2), naming ``flag`` and the file.
    """
    name = "standard input" if path == "-" else path
    label = f"{flag} {path}" if flag else path
    try:
        if path == "-":
            data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except IsADirectoryError:
        parser.error(f"{label} is a directory: pass a text file")
    except OSError as err:
        parser.error(f"{label}: cannot read it ({err.strerror})")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            where = f"{flag} {name}" if flag else name
            parser.error(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})")
    return data[1:] if data.startswith("\ufeff") else data


def closed_pipe(stdout):
    """After a ``BrokenPipeError``: silence ``stdout`` and return :data:`EXIT_BROKEN_PIPE`.

    The reader has all it wants (``| head``): stop quietly, as Unix tools do. The
    descriptor is pointed at /dev/null so that Python's own flush at exit does
    not raise the same error again.
    """
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file
        pass
    return EXIT_BROKEN_PIPE


#: Exit status when the output cannot be written (a full disk, a closed descriptor).
EXIT_WRITE_FAILED = 1


def write_flushed(stdout, pieces, prog=None, stderr=None):
    """Write each of ``pieces`` to ``stdout`` and flush it; return the exit status.

    0 once all is written; :func:`closed_pipe`'s status if the reader goes away.
    When the output cannot be written at all (``> /dev/full``: no space left on
    the device; ``>&-``: standard output closed), one line on ``stderr`` (default
    ``sys.stderr``) names the fault and the status is :data:`EXIT_WRITE_FAILED`,
    without a traceback and without Python's own complaint at exit.
    """
    import sys

    stderr = sys.stderr if stderr is None else stderr
    where = f"{prog}: error" if prog else "error"
    if stdout is None:  # Python sets sys.stdout to None when descriptor 1 is closed
        if stderr is not None:
            stderr.write(f"{where}: standard output is closed: nothing can be written\n")
        return EXIT_WRITE_FAILED
    try:
        for piece in pieces:
            stdout.write(piece)
            stdout.flush()
    except BrokenPipeError:
        return closed_pipe(stdout)
    except OSError as err:
        closed_pipe(stdout)  # drop what is buffered, so that the flush at exit succeeds
        if stderr is not None:
            name = getattr(stdout, "name", "<stdout>")
            name = "standard output" if name in ("<stdout>", 1) else name
            stderr.write(f"{where}: cannot write the output to {name}: {err.strerror or err}\n")
        return EXIT_WRITE_FAILED
    return 0


def out_dir(parser, path, flag="--out"):
    """The output folder ``path`` as a ``Path``, created (with its parents) and writable.

    A folder that cannot be made (under a file, no permission) or written ends
    the command through ``parser.error`` (one line, exit status 2), naming
    ``flag``: called before any work, so that a typo costs nothing.
    """
    from pathlib import Path

    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        parser.error(f"{flag} {out} is a file: pass a folder")
    except OSError as err:
        parser.error(f"{flag} {out}: cannot create it ({err.strerror or err})")
    if not os.access(out, os.W_OK | os.X_OK):
        parser.error(f"{flag} {out} is not writable")
    return out
