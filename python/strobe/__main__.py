"""``python -m strobe``: see :func:`strobe.cli`."""

import sys

from ._cli import cli

sys.exit(cli())
