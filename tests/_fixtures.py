"""Shared by the fixture tests: a script's fixture made again, beside the committed one.

Each ``scripts/make_*_fixture.py`` writes, with its ``build()``, a JSON file that
the node tests (``tests/js/``) check the browser runtime against; its test here
makes the fixture again from the library and compares it with the committed
one, so that a change in the library or a checkpoint cannot leave it stale.
"""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(name):
    """``scripts/<name>.py`` as a module (``scripts/`` is not a package; it is put on
    ``sys.path`` once, for the scripts that import each other)."""
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rebuilt(name, build=None):
    """The script ``name``, its fixture made again, and its committed fixture.

    ``build(module)`` makes the fixture (default: ``module.build()``); the
    committed one is read from ``module.FIXTURE``. Returns ``(module, fresh,
    committed)``, ``fresh`` passed through JSON as the committed one was (tuples
    become lists, keys strings), so that the two compare like for like.
    """
    module = load_script(name)
    committed = json.loads(module.FIXTURE.read_text(encoding="utf8"))
    fresh = json.loads(json.dumps(module.build() if build is None else build(module)))
    return module, fresh, committed
