"""Annotations for Python programs: regions, marks, thread names, progress
points (for ``strobe causal``).

Recorded by the strobe runtime when the interpreter runs under
``strobe sample -- python ...``; without it every call is a no-op (the
decorator returns the function itself).
"""

import functools

from . import _native

is_active = _native.is_active

if _native.is_active():
    region = _native.region
    mark = _native.mark
    set_thread_name = _native.set_thread_name
    progress = _native.progress
    progress_begin = _native.progress_begin
    progress_end = _native.progress_end
else:
    # Not under strobe (the runtime is preloaded before the interpreter
    # starts, so this cannot change later): plain Python no-ops, cheaper
    # to call than any native function.

    class _NoRegion:
        """What ``region()`` returns without the runtime: does nothing."""

        __slots__ = ()

        def __enter__(self):
            return self

        def __exit__(self, ty, value, tb):
            return None

        def __repr__(self):
            return "strobe.region(<not under strobe>)"

    _NO_REGION = _NoRegion()

    def region(name):
        """A context manager recording a region named ``name`` (here: none)."""
        return _NO_REGION

    def mark(name):
        """Records an instant marker named ``name`` (here: nothing)."""

    def set_thread_name(name):
        """Names the calling thread in the profile (here: nothing)."""

    def progress(name):
        """Counts one unit of work of progress point ``name`` (here: nothing)."""

    def progress_begin(name):
        """A unit of work of latency point ``name`` begins (here: nothing)."""

    def progress_end(name):
        """A unit of work of latency point ``name`` ends (here: nothing)."""


def traced(fn=None, *, name=None):
    """Records every call of the decorated function as a region named
    ``name`` (default: the function's qualified name).

    ``@strobe.traced`` or ``@strobe.traced(name="load")``. Without the
    runtime the function is returned unchanged, so it costs nothing.
    """

    def wrap(f):
        if not _native.is_active():
            return f
        r = _native.region(name or getattr(f, "__qualname__", f.__name__))

        @functools.wraps(f)
        def traced_call(*args, **kwargs):
            with r:
                return f(*args, **kwargs)

        return traced_call

    return wrap if fn is None else wrap(fn)
