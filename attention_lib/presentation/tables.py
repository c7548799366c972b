"""Plain-text tables for the chapters' printed results.

A chapter that prints a table of numbers should spend its visible lines on
the numbers, not on f-string padding. :func:`print_table` takes rows and
column headings and lines the columns up: text to the left, numbers to the
right, each column in its own format.
"""

import math
import numbers

__all__ = ["format_table", "power_of_ten_above", "print_table"]


def _cell(value, spec):
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not spec:
        return str(value)
    if isinstance(value, numbers.Integral) and spec[-1] not in "dnxXob,_%":
        return str(value)  # a count stays a whole number under a float format (not under %)
    return format(value, spec)


def format_table(rows, headers, formats=None):
    """The text of a table whose columns line up.

    Parameters
    ----------
    rows : sequence of sequences
        One sequence of cells per row, as many cells as ``headers``. A cell
        of ``None`` prints as ``-``.
    headers : sequence of str
        The column headings.
    formats : str or sequence of str or None, optional
        A format specification for the numbers of every column (``".3f"``,
        ``".1%"``), or one per column (``None`` or ``""`` for ``str``).
        Text cells, and whole numbers under a float format, are printed as
        they are; a whole number under a percentage format is a percentage
        (1 prints as ``100.0%`` under ``".1%"``).

    Returns
    -------
    str
        The heading line, a rule, and one line per row. Columns whose cells
        are all numbers are right-aligned, the others left-aligned.

    Raises
    ------
    ValueError
        If a row has a different number of cells than ``headers``, or
        ``formats`` is a sequence of another length.

    Examples
    --------
    >>> print(format_table([("diagonal", 0.5), ("intersect", 0.125)],
    ...                    ["aligner", "AER"], [None, ".1%"]))
    aligner      AER
    ---------  -----
    diagonal   50.0%
    intersect  12.5%
    """
    headers = [str(h) for h in headers]
    n = len(headers)
    if formats is None or isinstance(formats, str):
        formats = [formats] * n
    formats = list(formats)
    columns = f"the table has {n} columns ({', '.join(headers)})"
    if len(formats) != n:
        raise ValueError(f"formats has {len(formats)} entries but {columns}")
    rows = [list(row) for row in rows]
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {i} has {len(row)} cells but {columns}")
    text = [[_cell(v, f) for v, f in zip(row, formats)] for row in rows]
    numeric = [
        all(isinstance(row[j], numbers.Real) or row[j] is None for row in rows)
        and any(row[j] is not None for row in rows)
        for j in range(n)
    ]
    widths = [max([len(headers[j])] + [len(t[j]) for t in text]) for j in range(n)]

    def line(cells):
        return "  ".join(
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)
        ).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(t) for t in text])


def print_table(rows, headers, formats=None):
    """Print :func:`format_table` of the same arguments.

    Examples
    --------
    >>> print_table([("fr2en", 3, 0.25)], ["method", "n", "AER"], ".2f")
    method  n   AER
    ------  -  ----
    fr2en   3  0.25
    """
    print(format_table(rows, headers, formats))


def power_of_ten_above(x):
    """The smallest power of ten at or above ``|x|``, as text: a rounding error, printed stably.

    A largest difference of float64 arithmetic (``3.1e-15`` here, ``2.7e-15`` on a
    CPU whose BLAS adds in another order) changes its digits from one machine to the
    next; its order of magnitude does not, so a chapter prints that.

    Parameters
    ----------
    x : float
        A measured difference or error; finite.

    Returns
    -------
    str
        ``"0"`` for 0, else ``10 ** ceil(log10(|x|))`` written as ``"1e-09"``.

    Examples
    --------
    >>> power_of_ten_above(3.1e-15)
    '1e-14'
    >>> power_of_ten_above(-0.02), power_of_ten_above(0.0), power_of_ten_above(1e-6)
    ('1e-01', '0', '1e-06')
    """
    x = abs(float(x))
    if not math.isfinite(x):
        raise ValueError(f"x must be a finite number, got {x}")
    if x == 0:
        return "0"
    exponent = math.ceil(math.log10(x))
    if 10.0**exponent < x:  # log10 rounded down a hair below an exact power
        exponent += 1
    return f"{10.0**exponent:.0e}"
