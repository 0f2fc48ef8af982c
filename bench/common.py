"""What every bench shares: the checkout it measures (its scenarios, its results folder, the
commit its reports name) and where a bench's run folders go by default."""
from __future__ import annotations

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def results_folder(bench: str) -> Path:
    """results/<bench>-<UTC start> in the checkout: a sitting's run folders, kept together."""
    return ROOT / "results" / f"{bench}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
