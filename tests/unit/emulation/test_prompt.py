"""Waiting for a node's shell prompt is bounded and interruptible: Mininet's
own wait polls without a timeout, so a shell that never prompts hung the build, and SIGINT
(which the runner only records) could not end it."""
from __future__ import annotations

import os
import signal
import time

import pytest

from testbed import errors
from testbed.emulation.shells import FabricNode
from testbed.errors import Interrupted
from testbed.lifecycle import interrupts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mnexec makes namespaces as root")


class SilentNode(FabricNode):
    """A node whose 'shell' never prints a prompt."""

    def shell_argv(self, opts: str) -> list[str]:
        return ["mnexec", opts, "sleep", "30"]


def _node(name: str) -> SilentNode:
    return SilentNode(name, inNamespace=True)


def _end(node: FabricNode) -> None:
    node.shell.kill()
    node.shell.wait()
    os.close(node.slave)
    node.stdin.close()


def test_a_shell_that_never_prompts_is_an_error_after_the_timeout():
    node = _node("silent0")
    try:
        t0 = time.monotonic()
        with pytest.raises(errors.TestbedError, match="silent0: no shell prompt after 0.5 s"):
            node.finish_start(timeout=0.5)
        assert time.monotonic() - t0 < 2
    finally:
        _end(node)


def test_a_signal_ends_the_wait():
    node = _node("silent1")
    try:
        with interrupts.deferred():
            signal.raise_signal(signal.SIGTERM)  # recorded by the handler, seen at the wait
            t0 = time.monotonic()
            with pytest.raises(Interrupted):
                node.finish_start(timeout=20)
            assert time.monotonic() - t0 < 2
    finally:
        _end(node)


def test_a_real_shell_prompts():
    node = FabricNode("real0", inNamespace=True)
    try:
        node.finish_start(timeout=10)
        assert node.cmd("echo hi").strip() == "hi"
    finally:
        _end(node)
