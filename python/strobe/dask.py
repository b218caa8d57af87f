"""``strobe.dask``: profiles as Dask DataFrames, through Parquet datasets.

Owns :func:`read` (a table of a Parquet dataset that ``strobe convert -f
parquet`` wrote, or of profile databases converted to one first by the
same Rust code) and :func:`dataset` (the conversion alone, cached). Dask
is optional: importing ``strobe`` or this module never imports it; only
:func:`read` does, and says how to install it when it is missing. It
never reads a database itself and never writes beside an input: a
conversion goes to ``output`` or to a cache directory.

On a cluster, the dataset must be where every worker can read it: give
``output`` on a shared file system (or convert with ``strobe convert -f
parquet`` there first and pass the dataset).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import tempfile
from typing import Optional, Sequence

__all__ = ["TABLES", "dataset", "is_dataset", "read"]

#: The tables of a dataset (its sub-directories), see docs/parquet.md.
TABLES = ("processes", "threads", "regions", "samples", "stacks", "counters")

#: The file that marks a complete dataset.
MARKER = "_strobe.json"


def is_dataset(path) -> bool:
    """Whether ``path`` is a dataset ``strobe convert -f parquet`` wrote."""
    return os.path.isfile(os.path.join(os.fspath(path), MARKER))


def _database_files(inputs: Sequence[str]) -> list:
    """The ``.db`` files the inputs name (files, directories, globs), as
    the command line finds them; for the cache key only."""
    out = []
    for i in inputs:
        if os.path.isdir(i):
            for root, _dirs, files in os.walk(i):
                out.extend(os.path.join(root, f) for f in files if f.endswith(".db"))
        elif any(c in i for c in "*?[") and not os.path.exists(i):
            for g in glob.glob(i, recursive=True):
                if os.path.isdir(g):
                    out.extend(_database_files([g]))
                else:
                    out.append(g)
        else:
            out.append(i)
    return sorted({os.path.realpath(f) for f in out})


def _cache_dir(inputs: Sequence[str], start, end) -> str:
    """A directory named by what the dataset is made of: the databases
    (path, size, modification time), the window and strobe's version."""
    from . import _native

    h = hashlib.sha256()
    for f in _database_files(inputs):
        try:
            st = os.stat(f)
        except OSError:
            continue
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    h.update(f"{start}\0{end}\0{getattr(_native, '__version__', '')}".encode())
    base = os.environ.get("STROBE_PARQUET_CACHE") or os.path.join(tempfile.gettempdir(), "strobe-parquet")
    return os.path.join(base, h.hexdigest()[:20] + ".parquet")


def dataset(
    source,
    output=None,
    start: Optional[str] = None,
    end: Optional[str] = None,
    refresh: bool = False,
) -> str:
    """The Parquet dataset of ``source``, as an absolute path.

    ``source`` is a dataset directory (returned as is), or profile
    databases: a run directory, files, globs, or a list of them, converted
    (window ``start``/``end`` applied, as ``strobe convert --start/--end``
    takes them) into ``output``, by default a cache directory
    (``$STROBE_PARQUET_CACHE`` or ``<tmp>/strobe-parquet``) named by the
    databases' paths, sizes and times, reused until they change or
    ``refresh`` is true."""
    from . import export
    from ._profile import inputs_list

    if isinstance(source, (str, bytes, os.PathLike)) and is_dataset(source):
        if start is not None or end is not None:
            raise ValueError(
                f"{os.fsdecode(source)} is already a dataset: a window (start/end) applies when converting databases"
            )
        return os.path.abspath(os.fsdecode(source))
    inputs = inputs_list(source)
    out = os.fspath(output) if output is not None else _cache_dir(inputs, start, end)
    out = os.path.abspath(out)
    if refresh or output is not None or not is_dataset(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        export.convert(inputs, out, format="parquet", start=start, end=end)
    return out


def read(
    source,
    table: str = "regions",
    columns: Optional[Sequence[str]] = None,
    filters=None,
    output=None,
    start: Optional[str] = None,
    end: Optional[str] = None,
    refresh: bool = False,
    **kwargs,
):
    """A table of a profile as a ``dask.dataframe.DataFrame``.

    ``source``: a dataset directory, or profile databases (converted first,
    see :func:`dataset` for ``output``, ``start``, ``end`` and ``refresh``).
    ``table``: one of :data:`TABLES`. ``columns`` and ``filters`` are
    ``dask.dataframe.read_parquet``'s (filters on ``node`` and ``rank``
    skip whole partitions); other keyword arguments go to it too. The
    partition columns come as ``node`` (string) and ``rank`` (int64, -1
    for a process MPI did not launch)."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}: one of {', '.join(TABLES)}")
    try:
        import dask.dataframe as dd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "strobe.dask.read needs Dask: pip install 'dask[dataframe]' (and 'distributed' for a cluster)"
        ) from e
    import pyarrow as pa
    import pyarrow.dataset as pds

    path = os.path.join(dataset(source, output, start, end, refresh), table)
    # The partitions typed (node a string, rank an int64) rather than left
    # for Dask to make categories of, which filters cannot compare.
    options = dict(kwargs.pop("dataset", None) or {})
    options.setdefault(
        "partitioning",
        pds.partitioning(pa.schema([("node", pa.string()), ("rank", pa.int64())]), flavor="hive"),
    )
    return dd.read_parquet(
        path,
        columns=list(columns) if columns is not None else None,
        filters=filters,
        dataset=options,
        **kwargs,
    )


def summary(path) -> dict:
    """The dataset's marker: format version, strobe version, processes,
    rows and files per table."""
    with open(os.path.join(os.fspath(path), MARKER)) as f:
        return json.load(f)
