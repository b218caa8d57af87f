"""strobe: profiles as DataFrames, exports, and annotations for Python programs.

Reading: ``strobe.open(paths) -> Profile`` (tables as pandas, arrow or
polars, chunked when asked). Exports: ``strobe.export.writer``,
``strobe.convert``, ``strobe.merge``, ``strobe.summary``. Annotations
(``region``, ``traced``, ``mark``, ``set_thread_name``, and the progress
points ``progress``/``progress_begin``/``progress_end`` for ``strobe causal``)
are recorded under
``strobe sample -- python ...`` and cost almost nothing otherwise. The
command line's post-processing subcommands: ``python -m strobe`` or
``strobe.cli([...])``. Parquet datasets as Dask DataFrames:
``strobe.dask.read`` (imported on first use; Dask is optional). See
docs/python.md.
"""

from . import _native, export
from ._annotate import (
    is_active,
    mark,
    progress,
    progress_begin,
    progress_end,
    region,
    set_thread_name,
    traced,
)
from ._cli import cli
from ._profile import Flamegraph, Profile, Summary, open
from .export import convert, merge, summary

__all__ = [
    "Flamegraph",
    "Profile",
    "Summary",
    "cli",
    "convert",
    "export",
    "is_active",
    "mark",
    "merge",
    "open",
    "progress",
    "progress_begin",
    "progress_end",
    "region",
    "set_thread_name",
    "summary",
    "traced",
]


def __getattr__(name):
    # ``strobe.dask`` is imported when first used, so that ``import strobe``
    # stays quick and needs no Dask.
    if name == "dask":
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'strobe' has no attribute {name!r}")
