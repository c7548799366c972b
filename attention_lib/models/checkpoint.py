"""What every model's checkpoint shares: the checks of an ``.npz`` file and of its manifest.

A checkpoint is an ``.npz`` of parameter arrays and one JSON text array named
``config``, read with ``allow_pickle=False``. Each model reads its own file
with its ``load`` (:meth:`~attention_lib.models.TinyGPT.load`,
:meth:`~attention_lib.models.RNNsearch.load`,
:meth:`~attention_lib.models.transformer.Transformer.load`), and each uses the
checks here, so that they refuse a bad file the same way before anything is
allocated:

- :func:`array_headers`: every array's shape and dtype, read from the headers
  (no data);
- :func:`read_config`: the config, a JSON object;
- :func:`check_shapes`: the arrays are exactly the ones the config implies;
- :func:`manifest_sha256` and :func:`check_sha256`: a committed checkpoint
  matches the sha256 its ``manifest.json`` records.

Every fault raises :class:`CheckpointError` (a ``ValueError``) or, for a file in
``data/``, :class:`~attention_lib.DataFileError`, naming the file.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..data.paths import DataFileError, is_sha256, sha256

#: The largest config text a checkpoint may hold (it is a few hundred bytes).
MAX_CONFIG_CHARS = 65536


class CheckpointError(ValueError):
    """A checkpoint file that a model's ``load`` cannot read: damaged, altered, or not one.

    The message names the file and what is wrong with it.
    """


def array_headers(path: str | os.PathLike) -> dict:
    """``{name: (shape, dtype)}`` of every array in an ``.npz``, reading no data.

    Examples
    --------
    >>> import io, numpy as np
    >>> buffer = io.BytesIO()
    >>> np.savez(buffer, W=np.zeros((2, 3), np.float16))
    >>> array_headers(buffer)
    {'W': ((2, 3), dtype('float16'))}
    """
    headers = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                raise CheckpointError(f"{path}: holds {info.filename!r}, which is not an array")
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
                else:
                    raise CheckpointError(
                        f"{path}: array {info.filename!r} has .npy "
                        f"format version {version}, not 1.0 or 2.0"
                    )
            headers[info.filename[:-4]] = (shape, dtype)
    return headers


def read_config(path: Path, what: str = "a checkpoint written by save()") -> tuple[dict, object]:
    """``(headers, config)`` of the checkpoint at ``path``, the config parsed from JSON.

    A file that is not a zip of ``.npy`` arrays, or has no ``config`` text
    array (of at most :data:`MAX_CONFIG_CHARS` characters), or whose config
    is not JSON, raises :class:`CheckpointError` naming it and saying it is
    not ``what``. The config is returned as parsed: the caller
    checks that it is an object of its model.
    """
    try:
        headers = array_headers(path)
        shape, kind = headers.get("config", ((None,), None))
        if shape != () or kind is None or kind.kind != "U" or kind.itemsize // 4 > MAX_CONFIG_CHARS:
            raise CheckpointError(f"{path}: has no config (a JSON text array named 'config')")
        with np.load(path, allow_pickle=False) as f:
            config = json.loads(str(f["config"]))
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise CheckpointError(f"{path}: not {what}: {err}") from None
    return headers, config


def check_shapes(path: Path, headers: dict, shapes: dict, name: str | None = None) -> None:
    """Refuse a file whose arrays are not exactly ``shapes`` (``{name: shape}``), all float.

    ``headers`` is :func:`array_headers`' answer (its ``config`` is left
    out); ``name``, if given, is the model the config names, for the message.
    """
    arrays = {k: v for k, v in headers.items() if k != "config"}
    missing, unexpected = sorted(set(shapes) - set(arrays)), sorted(set(arrays) - set(shapes))
    which = f" ({name})" if name else ""
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: its arrays do not fit its config{which}: missing {missing[:5] or 'none'}"
            f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5] or 'none'}"
            f"{' ...' if len(unexpected) > 5 else ''}"
        )
    for k, want in shapes.items():
        got, kind = arrays[k]
        if tuple(got) != want or kind.kind != "f":
            raise CheckpointError(
                f"{path}: {k} is {kind} {tuple(got)} but its config{which} needs a float "
                f"array of shape {want}"
            )


def read_manifest(manifest: Path):
    """The JSON value in ``manifest``; a file that is not JSON (a merge-conflict marker, a
    truncated write) raises :class:`~attention_lib.DataFileError` naming it."""
    try:
        return json.loads(manifest.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataFileError(
            f"{manifest} is not valid JSON ({err}); restore it with git checkout"
        ) from None


def manifest_sha256(manifest: Path, name: str, model: str) -> str:
    """The checkpoint's sha256 from ``manifest``, which must describe ``model`` in ``name``.

    A manifest that is not JSON (a merge-conflict marker), not an object, or
    that describes another file or model raises
    :class:`~attention_lib.DataFileError` naming it.
    """
    data = read_manifest(manifest)
    if not isinstance(data, dict):
        raise DataFileError(f"{manifest} must be a JSON object, got a {type(data).__name__}")
    digest = data.get("sha256")
    if not is_sha256(digest):
        raise DataFileError(f'{manifest}: "sha256" must be 64 hex digits, got {digest!r}')
    if data.get("file", name) != name or data.get("model", model) != model:
        raise DataFileError(
            f"{manifest} describes {data.get('model')!r} in {data.get('file')!r}, "
            f"not the {model} in {name}"
        )
    return digest


def check_sha256(path: Path, expected: str, manifest: Path, error: type = DataFileError) -> None:
    """Refuse ``path`` unless its sha256 is ``expected`` (as ``manifest`` records it)."""
    if sha256(path) != expected:
        raise error(
            f"{path} does not match the sha256 in {manifest}: the file "
            "is altered or truncated; restore it with git checkout"
        )
