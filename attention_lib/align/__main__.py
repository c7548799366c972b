"""``python -m attention_lib.align``: see :mod:`attention_lib.align.cli`."""

import sys

from .cli import main

sys.exit(main())
