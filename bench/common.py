"""What every bench shares: the checkout it measures (its scenarios, its results folder, the
commit its reports name), where a bench's run folders go by default, its progress lines and
how it reads a run it made."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from analysis.load import Run, RunError, load_run
from analysis.metrics import cct

ROOT = Path(__file__).resolve().parents[1]


def results_folder(bench: str) -> Path:
    """results/<bench>-<UTC start> in the checkout: a sitting's run folders, kept together."""
    return ROOT / "results" / f"{bench}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def say(text: str) -> None:
    """Progress, on stderr: stdout is the bench's report."""
    print(text, file=sys.stderr, flush=True)


def loaded(run_dir: Path) -> Run | None:
    """The run, or None (said why) for one that did not complete or cannot be read."""
    try:
        return load_run(run_dir)
    except RunError as exc:
        say(f"  {run_dir.name}: {exc}")
        return None


def timed_iterations(run: Run) -> pd.DataFrame:
    """The timed iterations every rank completed, each with its CCT (analysis.metrics.cct)."""
    it = cct(run.tables["iterations"], run.t0)
    return it[~it["warmup"] & (it["ranks"] == it["ranks"].max())]
