"""The ``strobe`` command line's post-processing subcommands (avail, query,
merge, summary, convert, symbolize), run in the interpreter by the same
code as the binary: ``python -m strobe ...`` or ``strobe.cli([...])``."""

import sys

from . import _native


def cli(argv=None):
    """Runs ``strobe ARGV...`` (default: ``sys.argv[1:]``) and returns its
    exit status; ``sample`` and ``stat`` need the ``strobe`` binary."""
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.flush()
    sys.stderr.flush()
    return _native.cli_main([str(a) for a in args])
