"""The agents' compiled part (hostagent/_fastio.c), or an ImportError that says how to build it.

Required, not optional: every packet goes through it (batched socket IO in batchio.py, the
header in wire.py), and a pure-Python copy kept beside it would be code no run exercises.
setup.py declares it, so `pip install .` and `make dev` build it; `mrc-testbed` turns its
absence into exit status 3 (testbed/entry.py).
"""
from __future__ import annotations

MISSING = ("hostagent/_fastio.c is not built: run `make dev` (or `sudo make install`; it builds "
           "it with gcc, python3-dev and zlib1g-dev; `make ext` rebuilds only it)")

try:
    from hostagent import _fastio as fastio
except ImportError as exc:
    raise ImportError(MISSING, name="hostagent._fastio") from exc

__all__ = ["MISSING", "fastio"]
