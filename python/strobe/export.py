"""Exports: ``strobe.export.writer``, ``convert``, ``merge`` and ``summary``.

Owns the Python side of writing profiles out: the streaming writer
(DataFrames or Arrow tables of regions or samples, as ``Profile.regions()``
and ``Profile.samples()`` return them, or whole Profiles, streamed into
temporary profile databases by strobe-db's writer and converted on close by
the same Rust code as ``strobe convert``) and the one-call helpers. It
must never implement an output format or write a database itself.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Optional

import numpy as np
import pandas as pd

from . import _native
from ._profile import Inputs, Profile, Summary, decode_dictionary, inputs_list

__all__ = ["writer", "Writer", "convert", "merge", "summary"]


def _to_pandas(chunk) -> pd.DataFrame:
    if isinstance(chunk, pd.DataFrame):
        return chunk
    if hasattr(chunk, "schema") and hasattr(chunk, "column_names"):  # pyarrow.Table
        import pyarrow as pa

        for i, field in enumerate(chunk.schema):
            t = field.type
            if pa.types.is_dictionary(t) and pa.types.is_list(t.value_type):
                # pandas has no categories of lists: decode stacks.
                chunk = chunk.set_column(i, field.name, decode_dictionary(chunk.column(i)))
        return chunk.to_pandas()
    if hasattr(chunk, "to_pandas"):  # polars.DataFrame
        return chunk.to_pandas()
    raise TypeError(
        f"write() takes a Profile, a pandas or polars DataFrame or a pyarrow Table, not {type(chunk).__name__}"
    )


def _codes(values) -> tuple:
    """int32 codes (-1: missing) and the distinct values, as strings."""
    cat = values if isinstance(values, pd.Categorical) else pd.Categorical(values)
    codes = np.ascontiguousarray(cat.codes, dtype=np.int32)
    return codes.tobytes(), [str(c) for c in cat.categories]


def _ints(df: pd.DataFrame, name: str, default: int = 0) -> bytes:
    if name not in df.columns:
        return np.full(len(df), default, dtype=np.int64).tobytes()
    col = df[name]
    if col.isna().any():
        col = col.fillna(default)
    return np.ascontiguousarray(col.to_numpy(), dtype=np.int64).tobytes()


def _process_keys(df: pd.DataFrame) -> tuple:
    if "guid" in df.columns:
        return _codes(df["guid"].astype("category").array)
    return _codes(df["pid"].astype(np.int64).astype(str).array)


class Writer:
    """Streams regions and samples into an export (see :func:`writer`)."""

    def __init__(self, path, format: Optional[str] = None):
        self.path = os.fspath(path)
        self.format = format
        # The format is checked now, before any data is written.
        _native.check_format(self.path, format)
        self._dir = tempfile.mkdtemp(prefix="strobe-export-")
        self._sink = _native.ExportSink(self._dir)
        self._closed = False
        self.result: Optional[str] = None

    def write(self, chunk) -> None:
        """Adds a chunk: a Profile (all of it), or a DataFrame / Arrow
        table of regions (``pid, tid, name, start, end``, optional
        ``guid, category``) or samples (``pid, tid, timestamp``, optional
        ``guid, kind, weight_ns`` and ``stack`` or ``function, module``)."""
        if self._closed:
            raise ValueError("write() on a closed strobe export writer")
        if isinstance(chunk, Profile):
            self._sink.add_inputs(chunk.files)
            return
        df = _to_pandas(chunk)
        if len(df) == 0:
            return
        cols = set(df.columns)
        if {"start", "end", "name", "pid", "tid"} <= cols:
            self._regions(df)
        elif {"timestamp", "pid", "tid"} <= cols:
            self._samples(df)
        else:
            raise ValueError(
                "write() takes regions (columns pid, tid, name, start, end) or samples "
                f"(columns pid, tid, timestamp, stack or function); got columns {sorted(cols)}"
            )

    def _regions(self, df: pd.DataFrame) -> None:
        key, keys = _process_keys(df)
        name, names = _codes(df["name"].astype("category").array)
        if "category" in df.columns:
            cat, cats = _codes(df["category"].astype("category").array)
        else:
            cat, cats = np.full(len(df), -1, dtype=np.int32).tobytes(), []
        self._sink.regions(
            len(df), key, keys, _ints(df, "pid"), _ints(df, "tid"), name, names, cat, cats,
            _ints(df, "start"), _ints(df, "end"),
        )

    def _samples(self, df: pd.DataFrame) -> None:
        n = len(df)
        key, keys = _process_keys(df)
        if "kind" in df.columns:
            kind, kinds = _codes(df["kind"].astype("category").array)
        else:
            kind, kinds = np.zeros(n, dtype=np.int32).tobytes(), ["sample"]
        # A stack is its frame names (leaf first), the leaf's module kept.
        if "module" in df.columns:
            mod = pd.Categorical(df["module"].astype("category").array)
            mod_codes = mod.codes.astype(np.int64)
            modules = [str(m) for m in mod.categories]
        else:
            mod_codes = np.full(n, -1, dtype=np.int64)
            modules = []
        if "stack" in df.columns:
            st = df["stack"]
            if isinstance(st.dtype, pd.CategoricalDtype):
                stack_codes = st.cat.codes.to_numpy()
                names = [tuple(c) for c in st.cat.categories]
            else:
                # Lists or arrays (from Arrow or polars): one key per row.
                rows = st.map(lambda v: None if v is None else tuple(v))
                stack_codes, uniques = rows.factorize()
                names = list(uniques)
        elif "function" in df.columns:
            st = pd.Categorical(df["function"].astype("category").array)
            stack_codes = st.codes
            names = [(str(f),) for f in st.categories]
        else:
            raise ValueError("samples need a stack or a function column")
        combo = np.asarray(stack_codes).astype(np.int64) * (len(modules) + 1) + (mod_codes + 1)
        uniq, inverse = np.unique(combo, return_inverse=True)
        stacks = []
        for u in uniq.tolist():
            s, m = divmod(u, len(modules) + 1)
            if s < 0:
                stacks.append([])
                continue
            frames = names[s]
            leaf_module = modules[m - 1] if m > 0 else None
            stacks.append([(str(f), leaf_module if i == 0 else None) for i, f in enumerate(frames)])
        codes = np.ascontiguousarray(inverse.reshape(-1), dtype=np.int32)
        self._sink.samples(
            n, key, keys, _ints(df, "pid"), _ints(df, "tid"), _ints(df, "timestamp"),
            _ints(df, "weight_ns"), kind, kinds, codes.tobytes(), stacks,
        )

    def close(self) -> str:
        """Ends the writing and converts; returns what was written."""
        if self._closed:
            return self.result or ""
        self._closed = True
        try:
            self.result = self._sink.finish(self.path, self.format)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
        return self.result

    def discard(self) -> None:
        """Drops what was written without producing the output."""
        self._closed = True
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()


def writer(path, format: Optional[str] = None) -> Writer:
    """A streaming writer of an export in any ``strobe convert`` format
    (by name, or from ``path``'s extension): ``with writer("run.pftrace")
    as w: w.write(chunk)``. Chunks go into temporary profile databases in
    bounded memory; the conversion runs when the writer closes."""
    return Writer(path, format)


def convert(
    inputs: Inputs,
    output,
    format: Optional[str] = None,
    start: Optional[str] = None,
    end: Optional[str] = None,
) -> str:
    """``strobe convert``: the inputs read as one (window applied) written
    to ``output`` in ``format`` (or the format of its extension). Returns
    what was written."""
    return _native.convert(
        inputs_list(inputs), os.fspath(output), format,
        None if start is None else str(start), None if end is None else str(end),
    )


def merge(inputs: Inputs, output) -> dict:
    """``strobe merge``: the inputs merged into one database ``output``
    (which must not exist). Returns the counts merged."""
    files, processes, rows = _native.merge(inputs_list(inputs), os.fspath(output))
    return {"inputs": files, "processes": processes, "rows": rows}


def summary(
    inputs: Inputs, start: Optional[str] = None, end: Optional[str] = None, by_process: bool = False
) -> Summary:
    """The tables of ``strobe summary --merge-runs`` for the inputs, as
    DataFrames."""
    return Profile(inputs, start, end).summary(by_process)
