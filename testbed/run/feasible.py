"""Whether the emulation can run a scenario as stated, at the rate it will run at (pure).

Checked by `validate` and again by `run` once `rate: auto` has chosen the rate, before anything
is built: stated times the emulation cannot apply once dilated (testbed/fabric/frame.py), QP
windows that cannot work (windows.py), transport timers a QP could wait on past the run's
bound (timers.py), and the run's wall time against max_wall_time (wall_time.py). Each raises
`ScenarioError` naming the field and the fix.
"""
from __future__ import annotations

from testbed.fabric import frame, timers, windows
from testbed.run import wall_time
from testbed.scenario import Scenario


def check(scenario: Scenario, source: str) -> wall_time.WallTime:
    """Raises `ScenarioError` at the first problem; the run's wall-time estimate otherwise."""
    frame.check(scenario, source)
    windows.check(scenario, source)
    timers.check(scenario, source)
    return wall_time.check(scenario, source)
