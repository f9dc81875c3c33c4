"""``python -m mdf_loops``: the ``mdf-loops`` command."""

import sys

from .cli import main

sys.exit(main())
