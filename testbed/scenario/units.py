"""Rates and sizes as people write them in scenario files ("100Mbit", "64KiB").

Values are kept as plain integers (bits per second, bytes) so that the planning code and the
netlink layer never parse strings; the JSON Schema still shows editors the string form.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from annotated_types import GroupedMetadata
from pydantic import AfterValidator, BeforeValidator, PlainSerializer, WithJsonSchema

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
               "kib": 2**10, "mib": 2**20, "gib": 2**30}
_NUMBER = r"(\d{1,15}(?:\.\d{1,9})?)\s*"  # bounded: 400 digits overflowed a float
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


def _in_range(low: int, high: int, fmt: Callable[[float], str]) -> Callable[[int], int]:
    def check(value: int) -> int:
        if not low <= value <= high:
            shown = fmt(value) if abs(value) < 10**18 else f"a {len(str(abs(value)))}-digit number"
            raise ValueError(f"{shown} is outside {fmt(low)}..{fmt(high)}")
        return value
    return check


@dataclass(frozen=True)
class RateIn(GroupedMetadata):
    """`Annotated[int, RateIn(low, high)]`: a rate written with units, within low..high bit/s;
    the JSON Schema states the range too."""

    low: int
    high: int

    def __iter__(self) -> Iterator[Any]:
        yield BeforeValidator(parse_rate)
        yield AfterValidator(_in_range(self.low, self.high, format_rate))
        yield PlainSerializer(lambda v: f"{v}bit", return_type=str)
        yield WithJsonSchema({
            "anyOf": [{"type": "string", "pattern": f"(?i)^{RATE_PATTERN}$"},
                      {"type": "integer", "minimum": self.low, "maximum": self.high}],
            "description": f"bits per second, e.g. '100Mbit', from {format_rate(self.low)} "
                           f"to {format_rate(self.high)}"})


@dataclass(frozen=True)
class SizeIn(GroupedMetadata):
    """`Annotated[int, SizeIn(low, high)]`: a size written with units, within low..high bytes;
    the JSON Schema states the range too."""

    low: int
    high: int

    def __iter__(self) -> Iterator[Any]:
        yield BeforeValidator(parse_size)
        yield AfterValidator(_in_range(self.low, self.high, format_size))
        yield WithJsonSchema({
            "anyOf": [{"type": "string", "pattern": f"(?i)^{SIZE_PATTERN}$"},
                      {"type": "integer", "minimum": self.low, "maximum": self.high}],
            "description": f"bytes, e.g. '64KiB', from {format_size(self.low)} to "
                           f"{format_size(self.high)}"})
