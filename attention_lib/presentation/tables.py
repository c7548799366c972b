"""Plain-text tables for the chapters' printed results.

A chapter that prints a table of numbers should spend its visible lines on
the numbers, not on f-string padding. :func:`print_table` takes rows and
column headings and lines the columns up: text to the left, numbers to the
right, each column in its own format.
"""

import math
import numbers

__all__ = ["format_table", "order_of_magnitude", "print_table"]


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


def order_of_magnitude(x, floor=None):
    """``"about 1e-07"`` for ``9.6e-08``: a rounding error, printed the same on every CPU.

    A largest difference of float64 arithmetic changes its digits from one CPU to
    the next (BLAS kernels add in different orders); its order of magnitude, the
    power of ten nearest to it on a log scale, moves only if the error changes by
    a factor of about 3. A chapter prints that.

    Parameters
    ----------
    x : float
        A measured difference or error; finite.
    floor : float, optional
        Sizes below ``floor`` print as ``"below <floor>"``: a difference that is 0 on
        one CPU may be a last-bit rounding error on another.

    Returns
    -------
    str
        ``"0"``, ``"below 1e-15"`` (under ``floor``) or ``"about 1e-07"``: the power
        of ten ``10 ** round(log10(|x|))``.

    Examples
    --------
    >>> order_of_magnitude(9.6e-08), order_of_magnitude(-2.9e-14)
    ('about 1e-07', 'about 1e-14')
    >>> order_of_magnitude(0.0), order_of_magnitude(0.0, floor=1e-15)
    ('0', 'below 1e-15')
    """
    x = abs(float(x))
    if not math.isfinite(x):
        raise ValueError(f"x must be a finite number, got {x}")
    if floor is not None and x < floor:
        return f"below {floor:.0e}"
    if x == 0:
        return "0"
    return f"about {10.0 ** round(math.log10(x)):.0e}"
