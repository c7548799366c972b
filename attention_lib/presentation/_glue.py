"""Numbers for the prose: ``glue`` that works with or without Jupyter Book.

The chapters compute every number their text quotes and hand it to the page
with ``glue(name, value)``. On the site, myst-nb's ``glue`` stores the value
in the cell's output so that ``{glue:text}`` in the prose can show it. A
reader who downloads a chapter runs it in a plain Jupyter, where myst-nb is
usually not installed: there the value is simply displayed (or printed,
outside IPython), and the notebook runs to the end.
"""

try:  # myst-nb is part of the book's build (requirements.txt), not of the library
    from myst_nb import glue as _myst_nb_glue
except ImportError:  # a downloaded chapter in a plain Jupyter
    _myst_nb_glue = None


def glue(name, value, display=True):
    """Make ``value`` available to the page's prose under ``name``.

    Parameters
    ----------
    name : str
        The key that ``{glue:text}`` and ``{glue:}`` use in the chapter's text.
    value : object
        What to show: a number, a string, a figure, ...
    display : bool, optional
        Also show the value in the cell's output (myst-nb's default). With
        ``display=False`` the value is only stored for the prose. Without
        myst-nb (see the module docstring) the value cannot reach the prose
        and is only shown, when ``display`` is true.

    Examples
    --------
    >>> glue("answer", 42, display=False)    # stored for the page, shows nothing
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string (the key the prose uses), got {name!r}")
    if _myst_nb_glue is not None:
        _myst_nb_glue(name, value, display=display)
        return
    if not display:
        return
    try:
        from IPython import get_ipython
        from IPython.display import display as ipython_display
    except ImportError:
        ipython_display = None
    if ipython_display is not None and get_ipython() is not None:
        ipython_display(value)
    else:
        print(value)
