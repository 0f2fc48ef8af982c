"""What makes a bench's MRC-against-RoCEv2 comparison fair, shared by bench/paper.py and
bench/faults.py: every variant runs the same scenario copy on the same seeds, a run counts only
when it and its control were judged `faithful`, and each row reports min / median / max over
the runs it counts, with their number, under a header naming the command and the commit.

Variants: `mrc`, `rocev2` (lossy: Go-Back-N over a fabric that drops) and `rocev2-lossless`
(the same copy with `switch: {lossless: true}`, RoCEv2's usual deployment over PFC) by default;
`mrc-condemn` (`mrc: {untrimmed_loss: condemn}`) when asked for.
"""
from __future__ import annotations

import argparse
import functools
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.common import ROOT, results_folder


@dataclass(frozen=True)
class Variant:
    """A transport as a bench runs it: the scenario's `transport`, whether the switch is
    lossless (PFC), the settings written over the scenario, and what its runs' names end in."""

    transport: str
    lossless: bool = False
    overrides: tuple[tuple[str, str, str | int | bool], ...] = ()  # (section, key, value)
    suffix: str = ""


VARIANTS = {
    "mrc": Variant("mrc"),
    "rocev2": Variant("rocev2"),
    "rocev2-lossless": Variant("rocev2", lossless=True, suffix="-lossless"),
    # lossless and no ECN marks, so DCQCN never cuts: line rate under PFC alone, the RoCE
    # model htsim_roce runs by default (bench/htsim.py)
    "rocev2-lossless-noecn": Variant("rocev2", lossless=True, overrides=(("switch", "ecn", False),),
                                     suffix="-noecn"),
    # MRC condemning the EV of every loss that was not trimmed, as the MRC paper describes
    # its NICs (mrc.untrimmed_loss): a stated variant, run when asked for
    "mrc-condemn": Variant("mrc", overrides=(("mrc", "untrimmed_loss", "condemn"),),
                           suffix="-condemn"),
    # the same rule with 16 EVs a path, as a NIC keeps many EVs whatever the destination
    # (mrc.evs_per_path; 128 a QP between leaves of the paper fabric, inside the paper's
    # 100-256), so that condemning one takes a sixteenth of a path, not the path
    "mrc-condemn-ev16": Variant("mrc", overrides=(("mrc", "untrimmed_loss", "condemn"),
                                                  ("mrc", "evs_per_path", 16)),
                                suffix="-condemn-ev16"),
    # MRC spraying on its EVs alike whatever the fabric marks or trims: no EV skipped after a
    # mark, a trim or a loss congestion explains (mrc.congestion_holdoff and mrc.hot_rtts 0,
    # mrc.hot_ratio at its largest), to measure what that steering is worth; EV health on
    # losses congestion does not explain stays
    "mrc-unsteered": Variant("mrc", overrides=(("mrc", "congestion_holdoff", "0s"),
                                               ("mrc", "hot_ratio", 100),
                                               ("mrc", "hot_rtts", 0)),
                             suffix="-unsteered"),
}
DEFAULT_VARIANTS = ("mrc", "rocev2", "rocev2-lossless")
FAITHFUL = "faithful"
NAME_MAX = 40  # the scenario schema's limit on `name`


def parse_seeds(text: str) -> list[int]:
    """`1,2,3` as [1, 2, 3]: distinct non-negative integers, in the order given."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds {text!r}: give distinct non-negative integers, e.g. 1,2,3")
    return seeds


def parse_variants(text: str) -> list[str]:
    """`mrc,rocev2` as ['mrc', 'rocev2'], each one of VARIANTS."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if not names or unknown:
        raise ValueError(f"variants {text!r}: choose from {', '.join(VARIANTS)}")
    return names


def merged(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`data` with `overrides` written over it, mappings merged key by key."""
    out = dict(data)
    for k, v in overrides.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def variant_text(text: str, variant: str, seed: int,
                 overrides: dict[str, Any] | None = None) -> tuple[str, str]:
    """The scenario `text` as one run of `variant` with `seed` runs it: its name (the base
    name, the seed and, for the lossless variant, `-lossless`) and its YAML. Everything else
    is the scenario's own (with `overrides`, a bench's setting, merged in), so that every
    variant runs the same fabric and workload."""
    v = VARIANTS[variant]
    data = merged(yaml.safe_load(text), overrides or {})
    for section, key, value in v.overrides:
        data[section] = {**(data.get(section) or {}), key: value}
    name = f"{data['name']}-s{seed}{v.suffix}"
    if len(name) > NAME_MAX:
        raise ValueError(f"{data['name']}: {name!r} is longer than {NAME_MAX} characters; "
                         f"shorten the scenario's name")
    data |= {"name": name, "seed": seed, "transport": [v.transport]}
    if v.lossless:
        data["switch"] = {**(data.get("switch") or {}), "lossless": True}
        # a lossless fabric does not trim, and refuses a trimming threshold
        for cls in ("host_link", "fabric_link"):
            (data.get("fabric") or {}).get(cls, {}).pop("trim_threshold", None)
    return name, yaml.safe_dump(data, sort_keys=False)


RUN_TIMEOUT = 300.0  # s: one variant of these scenarios runs in under a minute


@dataclass(frozen=True)
class Checkout:
    """The code a run runs: this one, or another checkout of the project with its own venv
    (`make install` made it), so that two commits are measured in one sitting."""

    path: Path = ROOT

    @property
    def python(self) -> str:
        return sys.executable if self.path == ROOT else str(self.path / ".venv" / "bin" / "python")

    def commit(self) -> str:
        done = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=self.path,
                              capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else self.path.name

    def check(self) -> None:
        if not Path(self.python).is_file():
            raise ValueError(f"{self.path}: no {self.python}; run `make install` in that "
                             f"checkout first")


THIS = Checkout()


def checkouts(against: Path | None) -> list[Checkout]:
    """The checkouts a bench runs: this one, after `against` (another checkout, checked) when
    one is given, so that each seed runs the other commit first and this one beside it."""
    if against is None:
        return [THIS]
    other = Checkout(against.resolve())
    other.check()
    return [other, THIS]


@functools.cache
def _knows_lossless(python: str, path: Path) -> bool:
    """Whether the code at `path` has the lossless switch mode (older commits do not)."""
    done = subprocess.run([python, "-c", "from testbed.scenario.schema import Switch; "
                           "raise SystemExit(0 if 'lossless' in Switch.model_fields else 1)"],
                          cwd=path, capture_output=True)
    return done.returncode == 0


def supports(checkout: Checkout, variant: str) -> bool:
    """Whether `checkout`'s code can run `variant` (the lossless one needs the switch mode)."""
    return (not VARIANTS[variant].lossless or checkout == THIS or
            _knows_lossless(checkout.python, checkout.path))


def pairs(variants: Sequence[str], runs_on: Sequence[Checkout]) -> list[tuple[str, Checkout]]:
    """Each variant on each checkout that can run it, in the order a seed runs them."""
    return [(v, c) for v in variants for c in runs_on if supports(c, v)]


def left_out(variants: Sequence[str], runs_on: Sequence[Checkout]) -> str:
    """The report's line for the variants a checkout cannot run, empty if none."""
    out = [key(v, c) for v in variants for c in runs_on if not supports(c, v)]
    return (f"- not run: {', '.join(out)} (that code has no lossless switch mode)\n"
            if out else "")


def key(variant: str, checkout: Checkout) -> str:
    """A variant's name in a report: `VARIANT@COMMIT` when it ran on another checkout."""
    return variant if checkout == THIS else f"{variant}@{checkout.commit()}"


def add_options(ap: argparse.ArgumentParser, bench: str) -> None:
    """The options of a bench that compares variants: seeds, variants, the other checkout and
    the results folder (`results/<bench>-<utc>` by default)."""
    ap.add_argument("--seeds", default="1,2,3", help="every variant runs every seed")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--against", type=Path, metavar="CHECKOUT",
                    help="another checkout of the project to run beside this one (A/B)")
    ap.add_argument("--results", type=Path, help="where the run folders go "
                    f"(default: results/{bench}-<utc>)")


def add_again_options(ap: argparse.ArgumentParser, seeds: str, variants: str) -> None:
    """The options of a bench that can measure an earlier sitting's runs instead of running
    them: seeds, variants, the results folder and `--again`."""
    ap.add_argument("--seeds", default=seeds, help="comma-separated (default: %(default)s)")
    ap.add_argument("--variants", default=variants,
                    help="bench/fair.py variants (default: %(default)s)")
    ap.add_argument("--results", type=Path, default=None, help="results folder")
    ap.add_argument("--again", type=Path, default=None, metavar="DIR",
                    help="measure the runs of an earlier sitting of the same options (its "
                         "results folder) instead of running them")


def again_sitting(ap: argparse.ArgumentParser, args: argparse.Namespace,
                  bench: str) -> tuple[list[int], list[str], Path]:
    """The seeds, variants and results folder of `add_again_options` (a bad one ends the bench
    with its usage): `--again`'s folder, `--results`, or results/<bench>-<utc>."""
    try:
        seeds, variants = parse_seeds(args.seeds), parse_variants(args.variants)
    except ValueError as exc:
        ap.error(str(exc))
    if args.again is not None and not (args.again / "runs").is_dir():
        ap.error(f"--again {args.again}: no runs/ folder there; give the results folder of "
                 "an earlier sitting of this bench")
    return seeds, variants, args.again or args.results or results_folder(bench)


@dataclass(frozen=True)
class Sitting:
    """What a comparing bench runs, from its options: each seed runs `plan` in order."""

    seeds: list[int]
    variants: list[str]
    runs_on: list[Checkout]
    plan: list[tuple[str, Checkout]]
    out: Path

    @property
    def keys(self) -> list[str]:
        return [key(v, c) for v, c in self.plan]

    def lines(self) -> str:
        """The report's header lines on the sitting: results folder, seeds, what was left out."""
        return (f"- results: {self.out}\n- seeds: {', '.join(map(str, self.seeds))}\n"
                + left_out(self.variants, self.runs_on))


def sitting(ap: argparse.ArgumentParser, args: argparse.Namespace, bench: str) -> Sitting:
    """The options `add_options` added, checked (a bad one ends the bench with its usage)."""
    try:
        seeds, variants = parse_seeds(args.seeds), parse_variants(args.variants)
        runs_on = checkouts(args.against)
    except ValueError as exc:
        ap.error(str(exc))
    return Sitting(seeds, variants, runs_on, pairs(variants, runs_on),
                   args.results or results_folder(bench))


def run_variant(file: Path, variant: str, seed: int, out: Path,
                timeout: float = RUN_TIMEOUT,
                checkout: Checkout = THIS, overrides: dict[str, Any] | None = None,
                label: str = "") -> tuple[Path | None, str]:
    """Run one variant of the scenario `file` with `seed` on `checkout`'s code, `overrides`
    merged into its copy (`label` names them in the spec's and the runs' file names); its run
    folder (None if the run made none) and the command's stderr. Past `timeout` the run is
    interrupted (SIGINT: the runner cleans up what it built)."""
    name, text = variant_text(file.read_text(), variant, seed, overrides)
    tag = label + ("" if checkout == THIS else f"@{checkout.commit()}")
    spec = out / "specs" / f"{name}-{variant}{tag}.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(f"# {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}, "
                    f"variant {variant}, seed {seed}\n{text}")
    results = out / "runs" / f"{name}-{variant}{tag}"
    proc = subprocess.Popen([checkout.python, "-m", "testbed.cli", "run", str(spec),
                             "--no-report", "--quiet", "--results", str(results)],
                            cwd=checkout.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()
        err += f"\ninterrupted after {timeout:.0f} s"
    made = sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    return (made[-1] if made else None), err


def earlier(file: Path, variant: str, seed: int, out: Path,
            overrides: dict[str, Any] | None = None, label: str = "") -> Path | None:
    """The run folder an earlier sitting in `out` made for this run (run_variant's naming),
    for a bench's `--again`."""
    name, _ = variant_text(file.read_text(), variant, seed, overrides)
    runs = out / "runs" / f"{name}-{variant}{label}"
    made = sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    return made[-1] if made else None


def run_or_earlier(file: Path, variant: str, seed: int, out: Path, again: bool,
                   timeout: float = RUN_TIMEOUT, overrides: dict[str, Any] | None = None,
                   label: str = "") -> tuple[Path | None, str]:
    """The run a bench's sitting makes (run_variant), or with `again` the one an earlier
    sitting in `out` made (earlier); its folder and why there is none."""
    if not again:
        return run_variant(file, variant, seed, out, timeout=timeout, overrides=overrides,
                           label=label)
    return earlier(file, variant, seed, out, overrides, label), "no run folder in the sitting"


def why(stderr: str, limit: int = 200) -> str:
    """A failed run's reason for a table cell: its stderr on one line, the end kept (the
    testbed's error ends with the problem itself)."""
    text = " ".join(stderr.split()).replace("|", "/")
    return ("..." + text[-limit:] if len(text) > limit else text) or "no output"


def counted(verdicts: Sequence[str]) -> bool:
    """A run counts when every run it is judged with (itself, its control) was faithful."""
    return bool(verdicts) and all(v == FAITHFUL for v in verdicts)


@dataclass(frozen=True)
class Spread:
    """min / median / max of the counted runs' values, and how many runs were counted out of
    how many were made."""

    n: int
    runs: int
    low: float | None = None
    median: float | None = None
    high: float | None = None

    def text(self, fmt: str = "{:.2f}") -> str:
        if self.low is None or self.median is None or self.high is None:
            return "-"
        return "/".join(fmt.format(x) for x in (self.low, self.median, self.high))


def spread(values: Sequence[float | None], keep: Sequence[bool]) -> Spread:
    """The spread of `values` where `keep` is true and the value exists (a run with no
    iteration in a window has none)."""
    xs = [v for v, k in zip(values, keep, strict=True) if k and v is not None]
    if not xs:
        return Spread(0, len(values))
    return Spread(len(xs), len(values), min(xs), statistics.median(xs), max(xs))


def header(title: str, argv: Sequence[str]) -> str:
    """The lines a pasted table starts with: what it is, the command (`argv`: the interpreter's
    own, `sys.orig_argv`, so that `python -m bench.NAME ...` reads as it was typed), the commit,
    when."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else "?"

    dirty = (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no")
             else "")
    return (f"## {title}\n\n"
            f"- command: `{shlex.join(argv)}`\n"
            f"- commit: {git('rev-parse', '--short=12', 'HEAD')}{dirty}\n"
            f"- started: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")


def table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table: the form a reviewer pastes into an issue or the README."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
