"""Profiles as DataFrames: ``strobe.open`` and the ``Profile`` class.

Owns turning the columns the native module builds (``strobe._native``:
typed buffers, strings as dictionary codes) into pandas DataFrames,
pyarrow Tables or polars DataFrames without per-row Python objects, and
the Jupyter representations (``_repr_html_``, ``_repr_svg_``). It must
never compute anything the Rust side computes (summary numbers,
flamegraphs, exports) and never read a database itself.
"""

from __future__ import annotations

import builtins
import html
import os
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

from . import _native

Inputs = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

__all__ = ["open", "Profile", "Summary", "Flamegraph"]

_FORMATS = ("pandas", "arrow", "polars")


def inputs_list(inputs: Inputs) -> list:
    """Inputs as a list of strings: one path, directory or glob, or many."""
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    return [os.fsdecode(i) for i in inputs]


def _split_kind(kind):
    """``cat:int8`` → (``cat``, its codes' numpy type); others unchanged."""
    base, _, ty = kind.partition(":")
    return base, ty or None


def _pandas_column(kind, data, extra):
    kind, codes_type = _split_kind(kind)
    if kind == "i64":
        values = np.frombuffer(data, dtype=np.int64)
        if extra is None:
            return values
        valid = np.frombuffer(extra, dtype=np.bool_)
        return pd.arrays.IntegerArray(values, ~valid)
    if kind == "f64":
        return np.frombuffer(data, dtype=np.float64)
    if kind == "cat":
        codes = np.frombuffer(data, dtype=codes_type)
        return pd.Categorical.from_codes(codes, categories=pd.Index(extra, dtype=object))
    if kind == "stack":
        codes = np.frombuffer(data, dtype=codes_type)
        cats = pd.Index(extra, dtype=object, tupleize_cols=False)
        return pd.Categorical.from_codes(codes, categories=cats)
    if kind == "null":
        return np.full(data, np.nan)
    raise ValueError(f"unknown column kind {kind}")


def _arrow_column(kind, data, extra):
    import pyarrow as pa

    kind, codes_type = _split_kind(kind)
    if kind == "i64":
        values = np.frombuffer(data, dtype=np.int64)
        if extra is None:
            return pa.array(values)
        return pa.array(values, mask=~np.frombuffer(extra, dtype=np.bool_))
    if kind == "f64":
        return pa.array(np.frombuffer(data, dtype=np.float64))
    if kind in ("cat", "stack"):
        codes = np.frombuffer(data, dtype=codes_type)
        if kind == "cat":
            dictionary = pa.array(extra, type=pa.string())
        else:
            dictionary = pa.array([list(t) for t in extra], type=pa.list_(pa.string()))
        indices = pa.array(codes, mask=codes < 0) if (codes < 0).any() else pa.array(codes)
        return pa.DictionaryArray.from_arrays(indices, dictionary)
    if kind == "null":
        return pa.nulls(data)
    raise ValueError(f"unknown column kind {kind}")


def decode_dictionary(column):
    """A dictionary-encoded Arrow column as plain values (Arrow cannot cast
    a dictionary of lists)."""
    import pyarrow as pa

    return pa.chunked_array(
        [c.dictionary.take(c.indices) for c in column.chunks], type=column.type.value_type
    )


def _frame(columns, as_: str = "pandas"):
    """A DataFrame (or Table) of the native module's column tuples."""
    if as_ == "pandas":
        data = {name: _pandas_column(kind, d, extra) for name, kind, d, extra in columns}
        if not data:
            return pd.DataFrame()
        return pd.DataFrame(data, copy=False)
    if as_ in ("arrow", "polars"):
        import pyarrow as pa

        table = pa.table({name: _arrow_column(kind, d, extra) for name, kind, d, extra in columns})
        if as_ == "arrow":
            return table
        import polars as pl

        stacks = [name for name, kind, _, _ in columns if kind.startswith("stack")]
        if stacks:
            # polars has no dictionary of lists: decode those columns.
            for name in stacks:
                i = table.column_names.index(name)
                table = table.set_column(i, name, decode_dictionary(table.column(name)))
        return pl.from_arrow(table)
    raise ValueError(f"as_ must be one of {', '.join(_FORMATS)}, not {as_!r}")


def _result(native, as_: str):
    if isinstance(native, list):
        return _frame(native, as_)
    return (_frame(chunk, as_) for chunk in native)


def _check_as(as_: str):
    if as_ not in _FORMATS:
        raise ValueError(f"as_ must be one of {', '.join(_FORMATS)}, not {as_!r}")


class Flamegraph:
    """An SVG flamegraph (strobe-export's, as ``strobe convert -f svg``
    draws it); shows itself in Jupyter."""

    def __init__(self, svg: str):
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path) -> None:
        """Writes the SVG to ``path``."""
        with builtins.open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)

    def __str__(self) -> str:
        return self.svg


class Summary:
    """The tables of ``strobe summary``: ``regions``, ``functions`` and
    ``threads`` as DataFrames."""

    def __init__(self, tables: dict):
        self.regions: pd.DataFrame = _frame(tables["regions"])
        self.functions: pd.DataFrame = _frame(tables["functions"])
        self.threads: pd.DataFrame = _frame(tables["threads"])

    def tables(self) -> dict:
        """The tables by name."""
        return {"regions": self.regions, "functions": self.functions, "threads": self.threads}

    def _repr_html_(self) -> str:
        parts = []
        for name, df in self.tables().items():
            parts.append(f"<h4>{html.escape(name)} ({len(df)} rows)</h4>")
            parts.append(df.head(20).to_html(index=False))
        return "\n".join(parts)

    def __repr__(self) -> str:
        return "\n\n".join(f"{n}:\n{df.head(20).to_string(index=False)}" for n, df in self.tables().items())


class Profile:
    """One or many profile databases read as one, as ``strobe query``
    reads them. Tables come as pandas DataFrames (``as_="arrow"`` for a
    pyarrow Table, ``"polars"`` for a polars DataFrame); ``chunks=N``
    returns an iterator of tables of at most N rows, read in bounded
    memory, that concatenate to the whole table."""

    def __init__(self, inputs: Inputs, start: Optional[str] = None, end: Optional[str] = None):
        self._p = _native.NativeProfile(
            inputs_list(inputs),
            None if start is None else str(start),
            None if end is None else str(end),
        )

    @property
    def files(self) -> list:
        """The database files read."""
        return self._p.files()

    @property
    def window(self):
        """The absolute window (ns) applied; ``None`` for an open side."""
        return self._p.window()

    def _table(self, native_call, as_, chunks):
        _check_as(as_)
        return _result(native_call(chunks), as_)

    def query(self, sql: str, as_: str = "pandas", chunks: Optional[int] = None):
        """Runs SQL on the profile's views (``regions``, ``samples``,
        ``strobe_samples``, … over every process of every input)."""
        return self._table(lambda c: self._p.query(sql, c), as_, chunks)

    def regions(self, as_: str = "pandas", chunks: Optional[int] = None):
        """Regions: ``id, guid, pid, tid, category, name, start, end,
        duration, stack_id, event_id`` ordered by start."""
        return self._table(lambda c: self._p.named("regions", c), as_, chunks)

    def samples(self, stack: bool = False, as_: str = "pandas", chunks: Optional[int] = None):
        """Samples in time order: ``timestamp, pid, tid, guid, kind,
        weight_ns, stack_id, function, module`` (the leaf frame), and
        ``stack`` (tuples of frame names, leaf first) when ``stack=True``."""
        return self._table(lambda c: self._p.samples(stack, c), as_, chunks)

    def stacks(self, as_: str = "pandas", chunks: Optional[int] = None):
        """Every call site's frames: ``guid, stack_id, depth, function,
        module, rel_pc, file, line`` (depth 0 is the outermost frame); join
        with ``samples()`` on ``guid`` and ``stack_id``."""
        return self._table(lambda c: self._p.named("stacks", c), as_, chunks)

    def threads(self, as_: str = "pandas", chunks: Optional[int] = None):
        """Threads: ``guid, pid, tid, name, start, end, hostname``."""
        return self._table(lambda c: self._p.named("threads", c), as_, chunks)

    def processes(self, as_: str = "pandas", chunks: Optional[int] = None):
        """Processes: ``guid, pid, ppid, command, hostname, machine_id,
        init, start, end, fini``."""
        return self._table(lambda c: self._p.named("processes", c), as_, chunks)

    def counters(self, as_: str = "pandas", chunks: Optional[int] = None):
        """Counter time series: ``guid, pid, tid, name, units, timestamp,
        value``."""
        return self._table(lambda c: self._p.named("counters", c), as_, chunks)

    def functions(self, by_process: bool = False, as_: str = "pandas"):
        """Sampled functions, self and inclusive: the numbers of ``strobe
        summary`` (``self_samples, self_ns, self_pct, total_samples,
        total_ns, total_pct, off_cpu_self_ns, off_cpu_total_ns``)."""
        _check_as(as_)
        return _frame(self._p.functions(by_process), as_)

    def summary(self, by_process: bool = False) -> Summary:
        """The tables of ``strobe summary`` as DataFrames."""
        return Summary(self._p.summary(by_process))

    def flamegraph(
        self,
        title: Optional[str] = None,
        per_thread: bool = False,
        per_process: bool = False,
        off_cpu: bool = False,
    ) -> Flamegraph:
        """An SVG flamegraph of the samples (``strobe convert -f svg``)."""
        return Flamegraph(self._p.flamegraph(title, per_thread, per_process, off_cpu))

    def export(self, output, format: Optional[str] = None) -> str:
        """Writes the profile as ``strobe convert`` does (format by name,
        or from ``output``'s extension); returns what was written."""
        return self._p.export(os.fspath(output), format)

    def _counts(self) -> dict:
        q = (
            "SELECT (SELECT count(*) FROM rocpd_sample), (SELECT count(*) FROM rocpd_region),"
            " (SELECT count(*) FROM rocpd_info_thread), (SELECT count(*) FROM strobe_counter_sample)"
        )
        row = self.query(q).iloc[0].tolist()
        return dict(zip(("samples", "regions", "threads", "counter values"), (int(x) for x in row)))

    def _repr_html_(self) -> str:
        counts = self._counts()
        procs = self.processes()
        rows = "".join(
            f"<tr><td>{int(r.pid)}</td><td>{html.escape(str(r.hostname))}</td>"
            f"<td>{html.escape(str(r.command))}</td></tr>"
            for r in procs.head(20).itertuples()
        )
        files = ", ".join(html.escape(f) for f in self.files[:5])
        if len(self.files) > 5:
            files += f", … ({len(self.files)} files)"
        stats = ", ".join(f"{v:,} {k}" for k, v in counts.items())
        return (
            f"<div><b>strobe profile</b>: {files}<br>{len(procs)} processes, {stats}"
            f"<table><tr><th>pid</th><th>host</th><th>command</th></tr>{rows}</table></div>"
        )

    def __repr__(self) -> str:
        return f"<strobe.Profile {len(self.files)} files, {self._p.process_count()} processes>"


def open(inputs: Inputs, start: Optional[str] = None, end: Optional[str] = None) -> Profile:  # noqa: A001
    """Opens profile databases (files, directories searched for ``*.db``,
    glob patterns) as one profile, as ``strobe query -i`` does; ``start``
    and ``end`` restrict it to a window as ``--start/--end`` do
    (nanoseconds after the run start, or a percentage like ``"25%"``)."""
    return Profile(inputs, start, end)

