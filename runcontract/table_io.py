"""Writing and reading the collected tables, each checked against its schema (tables.py).

The writer is strict: a table the testbed writes has every column its run writes, of its
kind, and no column the schema does not declare (an agent's new or renamed field must be
declared, or the contract would say less than the files hold). The reader is lenient where
older folders differ: a column added since (`since`) or written only by some runs (`only`)
may be absent, an empty table of an older run may have no columns at all, and a column it
does not know is left alone; what it needs, it checks, so that a damaged table is one error
naming its file and column, not a KeyError inside a figure.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from runcontract.tables import TABLES, Column, Kind, Table

_DAMAGED = "a damaged or truncated file: rerun the scenario"
_OTHER = ("a table written by another testbed version, or edited: rerun the scenario, or read "
          "the folder with the version that wrote it (meta.json `versions`)")


class TableError(ValueError):
    """A table that is not what its schema says: `column` (None: the whole table) and what is
    wrong; `hint` the fix."""

    def __init__(self, table: Table, column: str | None, problem: str,
                 hint: str = _OTHER) -> None:
        self.table, self.column, self.problem, self.hint = table, column, problem, hint
        self.detail = problem if column is None else f"column {column!r} {problem}"
        super().__init__(f"{table.file}: {self.detail}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float | np.floating)


def _is_json(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        json.loads(v)
    except ValueError:
        return False
    return True


_VALUE: dict[Kind, Callable[[Any], bool]] = {
    "int": lambda v: _is_int(v) or (isinstance(v, float | np.floating) and float(v).is_integer()),
    "float": _is_number,
    "time": _is_number,
    "bool": lambda v: isinstance(v, bool | np.bool_),
    "str": lambda v: isinstance(v, str),
    "json": _is_json,
    "list": lambda v: isinstance(v, list | tuple | np.ndarray),
}


_PLAIN: tuple[Kind, ...] = ("bool", "int", "float", "str", "list")  # bool first: a bool is an int


def _kind_problem(column: Column, series: pd.Series) -> str | None:
    """What is wrong with `series` as `column`, or None."""
    present = series[series.notna()] if column.kind != "list" else series[series.map(
        lambda v: v is not None)]
    if len(present) < len(series) and not column.nullable:
        return f"has {len(series) - len(present)} null values where the schema allows none"
    wrong = present[~present.map(_VALUE[column.kind]).astype(bool)]
    if wrong.empty:
        return None
    value = wrong.iloc[0]
    value = value.item() if isinstance(value, np.generic) else value
    return (f"holds {_kind_of(value)} values ({value!r:.40}) where the schema says "
            f"{column.kind}")


def _kind_of(value: Any) -> str:
    """What a value is, in the schema's words (its type's name when none fits)."""
    for kind in _PLAIN:
        if _VALUE[kind](value):
            return kind
    return type(value).__name__


def problems(table: Table, frame: pd.DataFrame, context: Iterable[str],
             strict: bool = True) -> list[TableError]:
    """What keeps `frame` from being `table` of a run of `context` (its transport, "cluster"):
    as the testbed writes it (`strict`), or as a folder of any version may hold it."""
    if not strict and frame.empty and frame.columns.empty:
        return []  # an older run's empty table, written without columns
    written = table.written(frozenset(context))
    needed = written if strict else tuple(c for c in written if c.since == 1)
    found = [TableError(table, c.name, "is missing") for c in needed if c.name not in frame]
    if strict:
        known = {c.name for c in written}
        found += [TableError(table, str(name), "is not in the schema (declare it in "
                             "runcontract/tables.py, or leave it out)")
                  for name in frame.columns if name not in known]
    for name in frame.columns:
        column = table.column(str(name))
        problem = None if column is None else _kind_problem(column, frame[name])
        if problem is not None:
            found.append(TableError(table, str(name), problem))
    return found


def check(name: str, frame: pd.DataFrame, context: Iterable[str], strict: bool = True) -> None:
    """Raise `problems` as one error: the first's column, the first three said (a renamed
    field is one column missing and one unknown)."""
    found = problems(TABLES[name], frame, context, strict)
    if found:
        first = found[0]
        said = "; ".join(p.detail for p in found[1:3])
        more = (f"; {said}" if said else "") + (f" (and {len(found) - 3} more)"
                                                if len(found) > 3 else "")
        raise TableError(first.table, first.column, first.problem + more, first.hint)


_DTYPES: dict[Kind, Any] = {"int": "int64", "float": "float64", "time": "float64",
                            "bool": "bool", "str": str, "json": str, "list": object}


def empty_frame(name: str, context: Iterable[str]) -> pd.DataFrame:
    """A table with no rows and the columns a run of `context` writes, typed: a notebook
    reads an empty table's columns as it reads a full one's."""
    return pd.DataFrame({c.name: pd.Series(dtype=_DTYPES[c.kind])
                         for c in TABLES[name].written(frozenset(context))})


def frame_of(name: str, rows: list[dict[str, Any]], context: Iterable[str]) -> pd.DataFrame:
    """The table of `rows` (dicts, each a row), or an empty one with its columns."""
    return pd.DataFrame(rows) if rows else empty_frame(name, context)


def write_table(results_dir: Path, name: str, frame: pd.DataFrame,
                context: Iterable[str]) -> Path:
    """Check `frame` as table `name` of a run of `context`, then write it; `TableError` (a bug
    of the testbed) names the table and column that do not conform."""
    check(name, frame, context)
    path = results_dir / TABLES[name].file
    frame.to_parquet(path, index=False)
    return path


def read_table(results_dir: Path, name: str, transport: str) -> pd.DataFrame:
    """Table `name` of a results folder of a `transport` run, checked as a folder of any
    version holds it; `TableError` when it is unreadable or does not conform."""
    table = TABLES[name]
    try:
        frame = pd.read_parquet(results_dir / table.file)
    except Exception as exc:  # noqa: BLE001 (pyarrow raises several kinds for one cause)
        raise TableError(table, None, f"not a readable table ({type(exc).__name__}: "
                         f"{str(exc)[:200]})", _DAMAGED) from None
    check(name, frame, (transport,), strict=False)
    return frame
