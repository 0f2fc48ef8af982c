"""The hosts of one process wait for their files (start time, peers' `done`) on one shared poll:
its wake-ups do not grow with the hosts, a poll looks at an awaited path at most once however
many hosts await it (and only up to the first still missing), and nothing polls once nobody
waits."""
from __future__ import annotations

import asyncio
from pathlib import Path

from hostagent.runtime.file_wait import POLL, FileWaits


def test_many_hosts_waiting_share_one_poll_and_each_path_is_looked_at_once(tmp_path, monkeypatch):
    peers = [tmp_path / f"h{i}" / "done" for i in range(10)]
    looked: list[Path] = []
    exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: looked.append(p) or exists(p))
    waits = FileWaits()

    async def main() -> tuple[list[bool], int, int]:
        hosts = [asyncio.ensure_future(waits.until(peers, 5.0)) for _ in range(20)]
        await asyncio.sleep(0.1)
        polls = waits.polls
        for p in peers:
            p.parent.mkdir()
            p.touch()
        done = await asyncio.gather(*hosts)
        after = waits.polls
        await asyncio.sleep(0.05)
        assert waits.polls == after, "nobody waits: no more polls"
        return done, polls, len(looked)

    done, polls, count = asyncio.run(main())
    assert done == [True] * 20
    assert 0.1 / POLL / 2 <= polls <= 0.1 / POLL + 2, "one poll every POLL for all 20 hosts"
    # at first each host looks at its 10 files once; then each poll looks at the first path
    # still missing, once for all 20 hosts; the poll that sees them all looks at each once
    assert count <= 20 * 10 + (polls + 2) + 10


def test_a_wait_whose_time_runs_out_says_so_and_stops_polling(tmp_path):
    waits = FileWaits()

    async def main() -> tuple[bool, bool, int]:
        there = tmp_path / "start"
        there.touch()
        at_once = await waits.until([there], 1.0)
        late = await waits.until([tmp_path / "never"], 0.05)
        polls = waits.polls
        await asyncio.sleep(0.05)
        assert waits.polls == polls
        return at_once, late, polls

    at_once, late, polls = asyncio.run(main())
    assert at_once is True and late is False and polls >= 2


def test_a_done_host_lingers_until_every_peer_is_done(tmp_path: Path):
    """An agent stays to answer its peers' ACKs and resends until each has written `done`
    (agent.linger_until_peers_done): it returns only after the last peer's file appears."""
    from types import SimpleNamespace

    from hostagent.runtime import agent

    out = tmp_path / "h0"
    for host in ("h0", "h1", "h2"):
        (tmp_path / host).mkdir()
    cfg = SimpleNamespace(peers=[SimpleNamespace(host="h1"), SimpleNamespace(host="h2")],
                          timeout=5.0)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        loop.call_later(0.02, (tmp_path / "h1" / "done").touch)
        loop.call_later(0.08, (tmp_path / "h2" / "done").touch)
        await agent.linger_until_peers_done(cfg, out)  # type: ignore[arg-type]
        return loop.time() - start

    waited = asyncio.run(main())
    assert (out / "done").exists(), "it says it is done first"
    assert 0.08 <= waited < 1.0, f"returned after {waited:.3f} s, before h2 was done"
