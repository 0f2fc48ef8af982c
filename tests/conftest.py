"""Shared test helpers: how to tell whether this process may build fabrics."""
from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Property tests explore the same examples on every run: CI must not turn red by chance, and a
# failure found once reproduces on any machine. No example database is kept on disk.
settings.register_profile("testbed", derandomize=True, database=None, deadline=None)
settings.load_profile("testbed")


def pytest_collection_modifyitems(config, items):
    """Integration tests need root and Mininet; elsewhere they skip with the reason. As root
    (CI, `sudo make test`) they must run: a root run that would skip them all is an install
    problem, and passing without them would hide it."""
    reason = None
    if os.geteuid() != 0:
        reason = "needs root (namespaces); run `sudo make test`"
    else:
        try:
            import mininet.net  # noqa: F401
        except ImportError:
            reason = "Mininet is not importable; run `sudo make install`"
            raise pytest.UsageError(f"running as root, yet the integration tests would skip: "
                                    f"{reason}") from None
    for item in items:
        if "integration" in item.path.parts:  # the file's folder, not a parameter's id
            item.add_marker(pytest.mark.root)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
