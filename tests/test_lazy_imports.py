"""``import attention_lib`` is cheap: names and subpackages are imported on first use."""

import importlib
import subprocess
import sys

import pytest


def modules_after(code):
    """The top-level package names in ``sys.modules`` after running ``code`` in a fresh Python."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_the_package_loads_no_model_no_layer_and_no_scipy():
    loaded = modules_after("import attention_lib")
    assert "scipy" not in loaded
    assert not {m for m in loaded if m.startswith(("attention_lib.models", "attention_lib.nn"))}


def test_the_generate_command_line_runs_without_scipy():
    code = (
        "from attention_lib.generate import main\n"
        "main(['--model', 'stories260k', '--max-new-tokens', '2', '--temperature', '0'])\n"
        "main(['--model', 'shakespeare', '--prompt', 'A', '--max-new-tokens', '2',"
        " '--temperature', '0'])"
    )
    loaded = modules_after(code)
    assert "attention_lib.models.kv_cache" in loaded  # the fast path ran
    assert "scipy" not in loaded


@pytest.mark.parametrize("package", ["attention_lib", "attention_lib.nn", "attention_lib.models"])
def test_every_public_name_resolves_and_is_listed(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert getattr(value, "__name__", name) == name, f"{package}.{name} is {value!r}"
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_softmax_is_the_function_even_after_its_module_is_imported():
    code = "import attention_lib.softmax, attention_lib as a; print(callable(a.softmax))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
