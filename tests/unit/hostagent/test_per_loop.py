"""What the hosts of a process share lives once per event loop: the same object for every
host on the loop, a fresh one on the next loop (tests run many), none kept for a closed loop."""
from __future__ import annotations

import asyncio

from hostagent.runtime.per_loop import PerLoop


def test_one_object_per_loop_and_none_kept_for_a_closed_loop():
    made: list[object] = []
    shared = PerLoop(lambda: made.append(object()) or made[-1])

    async def hosts() -> bool:
        return shared.get() is shared.get()

    assert asyncio.run(hosts()), "every host of a loop gets the same object"
    assert asyncio.run(hosts()) and len(made) == 2, "the next loop gets its own"
    assert len(shared._by_loop) == 1, "the closed loop's object was dropped"
