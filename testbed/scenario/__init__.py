"""The scenario language: what a scenario file may say, validated into typed models (pure).

Nothing here builds, spawns or touches the kernel; the fabric plan, the kernel and the run
read these models.
"""
from testbed.scenario.schema import (
    DEFAULT_SCENARIO,
    Scenario,
    describe,
    format_errors,
    json_schema,
    load,
    parse,
)

__all__ = ["DEFAULT_SCENARIO", "Scenario", "describe", "format_errors", "json_schema", "load",
           "parse"]
