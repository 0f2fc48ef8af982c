"""Rates and sizes as people write them in scenario files ("100Mbit", "64KiB").

Values are kept as plain integers (bits per second, bytes) so that the planning code and the
netlink layer never parse strings; the JSON Schema still shows editors the string form.
"""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
               "kib": 2**10, "mib": 2**20, "gib": 2**30}
_NUMBER = r"(\d+(?:\.\d+)?)\s*"
RATE_PATTERN = _NUMBER + r"(" + "|".join(_RATE_UNITS) + r")"
SIZE_PATTERN = _NUMBER + r"(" + "|".join(_SIZE_UNITS) + r")?"


def _parse(value: object, pattern: str, units: dict[str, int], default_unit: str | None,
           expected: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        m = re.fullmatch(pattern, value.strip(), re.IGNORECASE)
        if m:
            unit = (m.group(2) or default_unit or "").lower()
            return round(float(m.group(1)) * units[unit])
    raise ValueError(expected)


def parse_rate(value: object) -> int:
    """Bits per second from "100Mbit" (tc's units; a bare number is bits per second)."""
    return _parse(value, RATE_PATTERN, _RATE_UNITS, None,
                  "a rate like '100Mbit' or '1Gbit' (units: bit, kbit, Mbit, Gbit, Tbit)")


def parse_size(value: object) -> int:
    """Bytes from "64KiB" or "100KB" (a bare number is bytes)."""
    return _parse(value, SIZE_PATTERN, _SIZE_UNITS, "b",
                  "a size like '64KiB' or '100KB' (units: B, KB, MB, GB, KiB, MiB, GiB)")


def format_rate(bps: float) -> str:
    """The shortest exact-enough human form, for logs and tables."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.0f} bit/s"


def format_size(nbytes: float) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


Rate = Annotated[
    int,
    BeforeValidator(parse_rate),
    PlainSerializer(lambda v: f"{v}bit", return_type=str),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": f"(?i)^{RATE_PATTERN}$"},
                              {"type": "integer", "minimum": 1}],
                    "description": "bits per second, e.g. '100Mbit', '1Gbit'"}),
]
Size = Annotated[
    int,
    BeforeValidator(parse_size),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": f"(?i)^{SIZE_PATTERN}$"},
                              {"type": "integer", "minimum": 1}],
                    "description": "bytes, e.g. '64KiB', '100KB'"}),
]
