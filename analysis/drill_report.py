"""A drill run's verdicts as a table (terminal, drills.txt), JSON (drills.json) and JUnit XML
(junit.xml: one test case per drill x transport x objective, so CI systems show drills as
tests: a failed objective is a failure, an inconclusive one is skipped with the reason)."""
from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import objectives
from .load import Run, RunError, load_run
from .objectives import Verdict


@dataclass
class DrillResult:
    drill: str
    transport: str
    verdicts: list[Verdict]
    runs: list[str] = field(default_factory=list)
    controls: list[str] = field(default_factory=list)
    source: str = ""  # where the objectives come from
    errors: list[str] = field(default_factory=list)
    paired: bool = False  # each repetition judged against its own control (controls[k])
    contrast: bool = False  # measured against another transport's objectives, not judged

    @property
    def status(self) -> str:
        if self.contrast or not self.verdicts:
            return "contrast (not judged)"
        return objectives.overall(self.verdicts)


def judge(drill: str, transport: str, runs: Sequence[Path], controls: Sequence[Path],
          spec: dict | None, source: str = "", errors: Sequence[str] = (),
          contrast: dict | None = None, report: Sequence[str] = (),
          paired: bool = False) -> DrillResult:
    """Load a drill's runs of one transport and judge them against `spec` (its objectives).
    Paired, `controls[k]` is `runs[k]`'s own control and a pair with either run unreadable
    is left out (and fails "every run has data"). A transport without objectives of its own
    is measured against `contrast` (another transport's), shown beside it and not judged.
    The objectives named in `report` are measured without a limit and shown as reported
    rows, which no verdict counts."""
    unreadable: list[str] = []

    def load(paths: Sequence[Path]) -> list[Run | None]:
        out: list[Run | None] = []
        for p in paths:
            try:
                out.append(load_run(p))
            except RunError as exc:  # a run with nothing to judge (e.g. every agent failed)
                unreadable.append(str(exc))
                out.append(None)
        return out

    loaded, loaded_controls = load(runs), load(controls)
    if paired:
        pairs = [(r, c) for r, c in zip(loaded, loaded_controls, strict=True)
                 if r is not None and c is not None]
        reps, steady = [r for r, _ in pairs], [c for _, c in pairs]
    else:
        reps = [r for r in loaded if r is not None]
        steady = [c for c in loaded_controls if c is not None]
    used = spec or contrast
    verdicts = objectives.evaluate(reps, steady, used, paired) if used and reps else []
    if unreadable:
        verdicts.insert(0, objectives.Verdict(
            "every run has data", f"{len(unreadable)} of {len(runs) + len(controls)} runs "
            f"have none", "all", "fail", "; ".join(unreadable)))
    if spec is None:
        verdicts = [objectives.Verdict(v.objective, v.measured, v.limit, "contrast", v.note,
                                       v.value) for v in verdicts]
    if report and reps:
        verdicts += [objectives.Verdict(v.objective, v.measured, "-", objectives.REPORTED,
                                        v.note, v.value) for v in objectives.evaluate(
                         reps, steady, dict.fromkeys(report, math.inf), paired)]
    return DrillResult(drill, transport, verdicts, [str(p) for p in runs],
                       [str(p) for p in controls], source, list(errors), paired, spec is None)


def table(results: Sequence[DrillResult]) -> str:
    """drill x transport x objective: measured, limit, verdict."""
    head = ("drill", "transport", "objective", "measured", "limit", "verdict")
    rows = []
    for r in results:
        if not r.verdicts:
            rows.append((r.drill, r.transport, "(no objectives, no runs to show)", "", "", ""))
        for v in r.verdicts:
            rows.append((r.drill, r.transport, v.objective, v.measured, v.limit,
                         v.status + (f" ({v.note})" if v.note else "")))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    widths[-1] = len(head[-1])  # the last column runs on
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()
    out = [line]
    for row in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    out.append("")
    for r in results:
        out.append(f"{r.drill} / {r.transport}: {r.status.upper()}"
                   + (f"  ({len(r.errors)} runs ended with an error)" if r.errors else ""))
    return "\n".join(out) + "\n"


def junit(results: Sequence[DrillResult]) -> str:
    suites = ET.Element("testsuites", name="mrc-testbed drills")
    by_drill: dict[str, list[DrillResult]] = {}
    for r in results:
        by_drill.setdefault(r.drill, []).append(r)
    for drill, group in by_drill.items():
        cases = [(r, v) for r in group for v in r.verdicts
                 if not r.contrast and v.status != objectives.REPORTED]
        suite = ET.SubElement(
            suites, "testsuite", name=drill, tests=str(len(cases)),
            failures=str(sum(v.status == "fail" for _, v in cases)),
            skipped=str(sum(v.status == "inconclusive" for _, v in cases)))
        for r, v in cases:
            case = ET.SubElement(suite, "testcase", classname=f"{drill}.{r.transport}",
                                 name=v.objective)
            text = f"measured {v.measured}; limit {v.limit}" + (f"; {v.note}" if v.note else "")
            if v.status == "fail":
                ET.SubElement(case, "failure", message=text).text = "\n".join(r.runs)
            elif v.status == "inconclusive":
                ET.SubElement(case, "skipped", message=f"inconclusive: {text}")
            else:
                ET.SubElement(case, "system-out").text = text
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write(results: Sequence[DrillResult], folder: Path) -> list[Path]:
    """drills.txt, drills.json and junit.xml in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [folder / "drills.txt", folder / "drills.json", folder / "junit.xml"]
    files[0].write_text(table(results))
    files[1].write_text(json.dumps([{**asdict(r), "status": r.status} for r in results],
                                   indent=2, default=str) + "\n")
    files[2].write_text(junit(results))
    return files


def exit_status(results: Sequence[DrillResult]) -> int:
    """0: every judged objective passed on faithful runs; 5: an objective failed; 6: none
    failed, but some could not be judged (inconclusive)."""
    statuses = {r.status for r in results if r.verdicts and not r.contrast}
    if "fail" in statuses:
        return 5
    if "inconclusive" in statuses:
        return 6
    return 0
