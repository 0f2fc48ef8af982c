"""The agents' C extension is required: without it every command stops with exit status 3 and
says how to build it (the extension's own behaviour: tests/unit/hostagent/test_wire.py and
test_batchio.py)."""
from __future__ import annotations

import subprocess
import sys

HIDE = "import sys; sys.modules['hostagent._fastio'] = None; "  # as if it were never built


def test_a_missing_build_is_exit_3_naming_make_install():
    res = subprocess.run([sys.executable, "-c", HIDE + "import testbed.cli"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 3
    assert "make install" in res.stderr and "_fastio" in res.stderr
    assert "Traceback" not in res.stderr


def test_the_agent_alone_names_the_fix_too():
    res = subprocess.run([sys.executable, "-c", HIDE + "import hostagent.runtime.driver"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "make install" in res.stderr
