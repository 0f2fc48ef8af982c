"""Rates, sizes and times as people write them in scenario files ("100Mbit", "64KiB", "1us").

Values are kept as plain numbers (bits per second, bytes, seconds) so that the planning code
and the netlink layer never parse strings; the JSON Schema still shows editors the string form.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from annotated_types import GroupedMetadata
from pydantic import AfterValidator, BeforeValidator, PlainSerializer, WithJsonSchema

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
               "kib": 2**10, "mib": 2**20, "gib": 2**30}
_NUMBER = r"(\d{1,15}(?:\.\d{1,9})?)\s*"  # bounded: 400 digits overflowed a float
# exact fractions, so that "500ns" is the float nearest 5e-7, not 500 x the float of 1e-9
_TIME_UNITS = {"ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "ms": Fraction(1, 10**3),
               "s": Fraction(1), "min": Fraction(60), "h": Fraction(3600)}
RATE_PATTERN = _NUMBER + r"(" + "|".join(_RATE_UNITS) + r")"
SIZE_PATTERN = _NUMBER + r"(" + "|".join(_SIZE_UNITS) + r")?"
# a sign, so that a negative time reaches the range check, which names it as such
TIME_PATTERN = "(-?" + _NUMBER[1:] + r"(" + "|".join(_TIME_UNITS) + r")?"
UNIT_TIME_PATTERN = "(-?" + _NUMBER[1:] + r"(" + "|".join(_TIME_UNITS) + r")"


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


TIME_EXPECTED = "a time like '1us', '2.5ms' or '3s' (units: ns, us, ms, s, min, h)"


def parse_time(value: object) -> float:
    """Seconds from "1us" or "2.5ms" (a bare number is seconds, as scenario times always were;
    a negative number passes, for the range check to name it)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(TIME_PATTERN, value.strip(), re.IGNORECASE)
        if m:
            return float(Fraction(m.group(1)) * _TIME_UNITS[(m.group(2) or "s").lower()])
    raise ValueError(TIME_EXPECTED)


def parse_unit_time(value: object) -> float:
    """Seconds from a time that must name its unit ("1us"): where a bare number is more
    likely a slip than seconds. Zero needs none."""
    if value == 0 and not isinstance(value, bool):
        return 0.0
    if isinstance(value, str) and re.fullmatch(UNIT_TIME_PATTERN, value.strip(), re.IGNORECASE):
        return parse_time(value)
    raise ValueError(f"{TIME_EXPECTED}, its unit written out")


def _in_nanoseconds(seconds: float) -> str:
    """A time with its unit, as `parse_unit_time` reads it back: "1000ns"."""
    return f"{seconds * 1e9:.3f}".rstrip("0").rstrip(".") + "ns"


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


def format_time(seconds: float) -> str:
    """The shortest exact-enough human form: "4 ms", "1 us", "2.5 s"."""
    for unit, scale in (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return "0 s" if seconds == 0 else f"{seconds * 1e9:.3g} ns"


def _in_range(low: float, high: float, fmt: Callable[[float], str],
              above: bool = False) -> Callable[[Any], Any]:
    """A check that `value` is in low..high (above low, when `above`)."""
    def check(value: Any) -> Any:
        if not (low < value if above else low <= value) or not value <= high:
            shown = (fmt(value) if abs(value) < 10**18 else "not a finite number"
                     if isinstance(value, float) else f"a {len(str(abs(value)))}-digit number")
            where = (f"above {fmt(low)} and at most {fmt(high)}" if above else
                     f"{fmt(low)}..{fmt(high)}")
            raise ValueError(f"{shown} is outside {where}")
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


@dataclass(frozen=True)
class TimeIn(GroupedMetadata):
    """`Annotated[float, TimeIn(low, high)]`: seconds, written with units or as a bare number
    of seconds, within low..high (`above`: above low, not at it); `unit`: a unit is required
    (zero excepted). The JSON Schema states the range too."""

    low: float
    high: float
    above: bool = False
    unit: bool = False

    def __iter__(self) -> Iterator[Any]:
        yield BeforeValidator(parse_unit_time if self.unit else parse_time)
        yield AfterValidator(_in_range(self.low, self.high, format_time, self.above))
        if self.unit:  # dumped as it must be written, so that it validates again
            yield PlainSerializer(_in_nanoseconds, return_type=str)
        number = {"type": "number", "maximum": self.high,
                  "exclusiveMinimum" if self.above else "minimum": self.low}
        pattern = UNIT_TIME_PATTERN if self.unit else TIME_PATTERN
        string = {"type": "string", "pattern": f"(?i)^{pattern}$"}
        yield WithJsonSchema({
            "anyOf": [string, {"type": "number", "minimum": 0, "maximum": 0} if self.unit
                      else number],
            "description": f"seconds, e.g. '1us' or '2.5ms'"
                           f"{' (the unit is required)' if self.unit else ''}, "
                           f"{'above' if self.above else 'from'} {format_time(self.low)} to "
                           f"{format_time(self.high)}"})
