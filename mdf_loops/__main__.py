"""``python -m mdf_loops``: the ``mdf-loops`` command."""

import sys

from mdf_loops.cli.commands import main

sys.exit(main())
