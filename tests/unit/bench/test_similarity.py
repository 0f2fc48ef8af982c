"""bench/similarity.py's pure parts: the factors, the slowed copies, agreement, what moves."""
from __future__ import annotations

import pytest
import yaml

from bench import fair
from bench.similarity import FOLDER, agreement, changing, parse_factors, slowed
from testbed.fabric.frame import dilation
from testbed.scenario import parse


def test_factors_include_the_base_and_are_sorted():
    assert parse_factors("2,1,4") == [1, 2, 4]
    for bad in ("2,4", "1,1", "0,1", "1,x"):
        with pytest.raises(ValueError):
            parse_factors(bad)


def test_a_slowed_copy_multiplies_the_dilation_and_keeps_the_real_fabric():
    """Factor 2 halves both link classes' emulated rates: D doubles, real_rate and every
    real-frame time stay as written."""
    text = (FOLDER / "link-down.yaml").read_text()
    base = parse(text, "t")
    merged = fair.merged(yaml.safe_load(text), slowed(FOLDER / "link-down.yaml", 2))
    twice = parse(yaml.safe_dump(merged), "t")
    assert dilation(twice) == 2 * dilation(base)
    assert twice.fabric.fabric_link.rate * 2 == base.fabric.fabric_link.rate
    assert (twice.fabric.real_rate, twice.faults) == (base.fabric.real_rate, base.faults)
    assert slowed(FOLDER / "control.yaml", 1) == {}


def spread(*xs: float) -> fair.Spread:
    return fair.spread(list(xs), [True] * len(xs))


def test_medians_agree_within_the_wider_seed_range():
    base = spread(100.0, 104.0, 110.0)  # range 10
    assert agreement(base, spread(108.0, 109.0, 111.0)).agrees  # 5 apart, ranges 10 and 3
    assert not agreement(base, spread(120.0, 121.0, 122.0)).agrees  # 17 apart
    # identical seeds (no range): 2% of the median still agrees, 3% does not
    assert agreement(spread(100.0), spread(102.0)).agrees
    assert not agreement(spread(100.0), spread(103.0)).agrees
    assert agreement(spread(100.0), fair.spread([None], [True])).text() == "-"


def test_only_departures_that_change_with_the_factor_are_listed():
    moving = changing({
        1: [{"quantity": "routing", "used": "250 us"}, {"quantity": "queue", "used": "12 KiB"}],
        2: [{"quantity": "routing", "used": "125 us"}, {"quantity": "queue", "used": "12 KiB"}]})
    assert moving == ["routing: x1 250 us, x2 125 us"]
