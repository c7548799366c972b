"""Compare a notebook's freshly executed outputs with its committed ones, as nbval does.

The Binder and Colab checks execute every chapter anyway (in their own
environments, with nbclient); comparing what they print with the committed
outputs turns each of them into one more nbval pass, under another CPU kernel
family (see scripts/cpu_families.py), at no extra execution cost.

The rules are nbval's (``pytest --nbval``), so a notebook that passes the
nbval stage passes here unless an output really changed:

- every code cell is compared, except cells tagged ``nbval-ignore-output``
  or ``nbval-skip`` (or marked ``# NBVAL_IGNORE_OUTPUT`` / ``# NBVAL_SKIP``),
  cells never run in the committed notebook, and cells the caller skips;
- stream outputs of the same name are joined (text a ``\\r`` overwrites dropped),
  and every output is reduced to its fields: ``stdout``/``stderr`` text and
  each MIME type of its ``data`` (PNG and JPEG images, metadata and
  execution counts are not compared, as in nbval without ``--nbdime``);
- outputs with the same field must agree in number and order.

Standard library only: it runs in whichever Python runs the check.
"""

import json
import re
from pathlib import Path

IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip"}
IGNORE_COMMENTS = ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP")
SKIP_KEYS = {
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "image/png",
    "image/jpeg",
    "application/vnd.jupyter.widget-view+json",
    "transient",
}


def _text(value):
    return "".join(value) if isinstance(value, list) else value


_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)


def _apply_carriage_returns(text):
    """Drop what a ``\\r`` overwrites (nbval's pattern; its backspace rule never runs)."""
    return _CARRIAGE_RETURN.sub("", text)


def comparable(outputs):
    """``{field: [values]}`` for a cell's outputs (nbval's reduction)."""
    merged, streams = [], {}
    for out in outputs:
        if out.get("output_type") == "stream":
            name = out.get("name", "stdout")
            if name in streams:
                streams[name]["text"] += _text(out.get("text", ""))
            else:
                streams[name] = {
                    "output_type": "stream",
                    "name": name,
                    "text": _text(out.get("text", "")),
                }
                merged.append(streams[name])
        else:
            merged.append(out)
    fields = {}
    for out in merged:
        if out.get("output_type") == "stream":
            fields.setdefault(out["name"], []).append(_apply_carriage_returns(out["text"]))
            continue
        for key, value in out.items():
            if key in SKIP_KEYS:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIP_KEYS:
                        fields.setdefault(mime, []).append(
                            data if isinstance(data, dict) else _text(data)
                        )
            else:
                fields.setdefault(key, []).append(_text(value))
    return fields


def compared(cell):
    """Whether nbval compares this cell's outputs."""
    if cell.get("cell_type") != "code" or cell.get("execution_count") is None:
        return False
    tags = set(cell.get("metadata", {}).get("tags", []))
    source = _text(cell.get("source", ""))
    return not (
        tags & IGNORE_TAGS
        or any(source.lstrip().startswith(c) or f"\n{c}" in source for c in IGNORE_COMMENTS)
    )


def _short(value, limit=400):
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def differences(committed, executed, skip_cells=()):
    """Cells whose outputs differ, as readable lines (empty: they all match).

    Parameters
    ----------
    committed, executed : path or dict
        The notebook as committed and the same notebook just executed.
    skip_cells : collection of int
        Indices (in the notebook's cell list) not to compare, e.g. the Colab
        set-up cell, whose output on Colab is pip's.
    """

    def load(nb):
        return nb if isinstance(nb, dict) else json.loads(Path(nb).read_text(encoding="utf-8"))

    ref, new = load(committed), load(executed)
    if len(ref["cells"]) != len(new["cells"]):
        return [
            f"the executed notebook has {len(new['cells'])} cells, the committed one "
            f"{len(ref['cells'])}"
        ]
    problems = []
    for index, (a, b) in enumerate(zip(ref["cells"], new["cells"])):
        if index in skip_cells or not compared(a):
            continue
        want, got = comparable(a.get("outputs", [])), comparable(b.get("outputs", []))
        where = f"cell {index} (execution count {a.get('execution_count')})"
        if set(want) != set(got):
            problems.append(
                f"{where}: output fields differ: committed {sorted(want)}, now {sorted(got)}"
            )
            continue
        for key in want:
            if len(want[key]) != len(got[key]):
                problems.append(
                    f"{where}: {len(want[key])} {key} output(s) committed, {len(got[key])} now"
                )
                break
            pairs = [(x, y) for x, y in zip(want[key], got[key]) if x != y]
            if pairs:
                x, y = pairs[0]
                if isinstance(x, str) and isinstance(y, str):
                    lines = [(p, q) for p, q in zip(x.splitlines(), y.splitlines()) if p != q]
                    p, q = lines[0] if lines else (x, y)
                    problems.append(
                        f"{where}: {key} differs:\n  committed: {_short(p)}\n"
                        f"  now:       {_short(q)}"
                    )
                else:
                    problems.append(
                        f"{where}: {key} differs:\n  committed: {_short(x)}\n"
                        f"  now:       {_short(y)}"
                    )
                break
    return problems
