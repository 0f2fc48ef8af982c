"""bench/proto.py's regimes: each delivers every byte, the paced one lets one data packet
leave a QP per step, and the one over sockets goes through the IO driver, with the delay line
and NIC pacing when asked."""
from __future__ import annotations

import pytest

from bench import proto

SIZE, MESSAGE = 256 * 1024, 64 * 1024


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_the_paced_regime_takes_a_step_per_packet_and_lands_every_byte(transport):
    per_side = SIZE // proto.CFG.mss
    paced = proto.run(transport, SIZE, MESSAGE, paced=True)  # raises if a byte landed wrong
    assert paced["packets"] == 2 * per_side and paced["retransmits"] == 0
    assert paced["virtual_s"] >= per_side * proto.STEP  # at most one packet a step per side
    full = proto.run(transport, SIZE, MESSAGE)
    assert full["packets"] == 2 * per_side
    assert full["virtual_s"] < paced["virtual_s"] / 2  # whole windows a step


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_over_sockets_every_byte_lands_through_the_driver_without_resends(transport,
                                                                          monkeypatch):
    from hostagent.runtime import driver
    drivers: list[object] = []
    made = driver.Driver
    monkeypatch.setattr(driver, "Driver", lambda *a, **kw: drivers.append(made(*a, **kw))
                        or drivers[-1])
    out = proto.over_sockets(transport, SIZE, MESSAGE)  # raises if a byte landed wrong
    assert out["packets"] == 2 * (SIZE // proto.CFG.mss) and out["retransmits"] == 0
    assert len(drivers) == 2, "each end a Driver over its own sockets"


def test_a_process_apart_runs_the_protocol_of_the_checkout_it_is_given(tmp_path):
    """`--instructions --against CHECKOUT` counts that checkout's protocol: the process apart
    imports hostagent from it, not from this checkout (installed or in the working folder)."""
    import json
    import shutil
    import subprocess

    other = tmp_path / "other"
    shutil.copytree(proto.HERE / "hostagent", other / "hostagent",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    cmd, env = proto.apart(other, ["mrc", "--size", str(SIZE), "--message", str(MESSAGE),
                                   "--repeat", "1", "--json"], MRC_TESTBED_PURE="1")
    done = subprocess.run(cmd, env=env, cwd=proto.HERE, capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout)["code"] == str(other.resolve())


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_over_sockets_with_latency_every_write_waits_a_round_trip(transport):
    """--latency: a write completes on its last ACK, twice the held time after it left."""
    latency = 0.1
    out = proto.over_sockets(transport, SIZE, MESSAGE, latency)
    assert out["packets"] == 2 * (SIZE // proto.CFG.mss) and out["retransmits"] == 0
    assert out["virtual_s"] >= 2 * latency


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_over_sockets_with_a_rate_goes_no_faster_than_the_ports(transport):
    """--rate: past what the ports may hold at once, the bytes leave at the ports' rate."""
    rate, size = 25_000_000, 4 * SIZE
    out = proto.over_sockets(transport, size, MESSAGE, rate=rate)
    assert out["packets"] == 2 * (size // proto.CFG.mss)
    planes = proto.PLANES if transport == "mrc" else 1  # RoCEv2's one QP: one plane
    assert out["virtual_s"] >= (size - planes * proto.NIC_LIMIT) * 8 / (planes * rate)


@pytest.mark.parametrize("argv, says", [
    (["--latency", "0.01"], "add --sockets"),
    (["--sockets", "--rate", "1000000"], "add --latency"),
    (["--sockets", "--latency", "0"], "above 0"),
    (["--sockets", "--latency", "0.01", "--json"], "compares its own two runs")])
def test_latency_options_out_of_place_are_refused(argv, says, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["proto.py", *argv])
    with pytest.raises(SystemExit):
        proto.main()
    assert says in capsys.readouterr().err
