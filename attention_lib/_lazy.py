"""Names a package imports when they are first used (PEP 562's module ``__getattr__``).

``import attention_lib`` then costs little, and a command line such as
``python -m attention_lib.generate`` loads only the modules it runs
(``python -X importtime`` shows what each one costs).
"""

import importlib


def lazy_names(package: str, table: dict, subpackages: tuple = ()):
    """``(__getattr__, __dir__)`` for ``package``, importing ``table``'s names on first use.

    ``table`` maps a module (relative to ``package``, e.g. ``"data.paths"``) to the
    names it gives; ``subpackages`` are modules reachable as attributes.
    Each name, once imported, is kept in the package's namespace.

    Examples
    --------
    >>> getattr_, dir_ = lazy_names("attention_lib", {"masks": ("causal_mask",)})
    >>> getattr_("causal_mask").__name__
    'causal_mask'
    >>> getattr_("no_such_name")
    Traceback (most recent call last):
        ...
    AttributeError: module 'attention_lib' has no attribute 'no_such_name'
    """
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name):
        if name in where:
            module = importlib.import_module(f".{where[name]}", package)
            value = getattr(module, name)
        elif name in subpackages:
            value = importlib.import_module(f".{name}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(where) | set(subpackages))

    return __getattr__, __dir__
