"""`mrc-testbed`: emulated multi-plane Clos fabrics in Mininet, MRC against RoCEv2.

The subcommands are in `COMMANDS` (validate, run, report, compare, drill, calibrate, clean,
list, schema), the exit statuses in `EXIT_STATUS`. Errors print as one message (no traceback
unless --debug).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import cast

from runcontract import RunMeta, UserError, read_meta
from runcontract.facts import algorithm_line
from testbed import scenario
from testbed.errors import EnvironmentProblem, NotFaithful, TestbedError
from testbed.fabric import latency, timeline, timers
from testbed.fabric.frame import Frame
from testbed.fabric.placement import place
from testbed.fabric.plan import make_plan
from testbed.kernel import features
from testbed.lifecycle import cleanup, interrupts, registry
from testbed.lifecycle.progress import Progress
from testbed.run import algorithm, feasible, results, wall_time
from testbed.scenario.job_views import lines as job_lines
from testbed.scenario.units import format_rate
from testbed.version import version

DESCRIPTION = ("Emulated multi-plane Clos fabrics in Mininet: build them, run MRC and RoCEv2 "
               "over them, report and compare.")
EXIT_STATUS = ("Exit status: 0 fine, 1 a bug (the message asks to report it) or agents that "
               "failed (the message names them), 2 invalid "
               "scenario, drill or arguments, 3 the machine cannot do it (not root, a kernel "
               "feature missing, another run active), 4 the fabric failed verification, 5 a "
               "drill objective failed, 6 no drill objective failed but some were "
               "inconclusive (too few samples, no steady state, a run not judged faithful), 7 a "
               "run's fidelity verdict was not `faithful` (only with `run "
               "--require-faithful`), 8 a transport gave up: a QP exhausted its retries, "
               "as a job would abort (the run completed; its summary and report say which QP, "
               "when and after how many timeouts), 130 interrupted.")
GAVE_UP = 8  # the exit status of a run in which a transport gave up (EXIT_STATUS)


class _Version(argparse.Action):
    """`--version`: git runs only when asked."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version())
        parser.exit()


def _seconds(text: str) -> float:
    """A finite, non-negative number of seconds (`nan` compares false with everything and
    used to run the workload instead of holding)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or more seconds")
    return value


# Each subcommand's one line (the overview in `mrc-testbed --help`) and, where a line is not
# enough, what its own `--help` says besides; the command reference is generated from both.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("check scenario files, build nothing (no root needed)",
                 "Each file is checked and summarised; a bad one gets its own message and "
                 "the exit status is the worst. For a `cluster:` scenario it prints the "
                 "placement (nodes per server, crossing links, their rates); with "
                 "`rate: auto`, the rate the cached calibration and pilot give, or what `run` "
                 "will measure first."),
    "run": ("per transport: build the fabric, verify every path, run the workload, collect "
            "the results, tear down; then the reports",
            "Each of the scenario's transports gets a fabric of its own and a results folder "
            "(RESULTS/<utc>-<scenario>-<transport>); the reports (HTML + figures) and a "
            "summary follow, with a comparison when there are several transports. "
            "`--verify-only`, `--hold` and `--cli` build and verify the fabric but run no "
            "workload."),
    "report": ("render each run's report (HTML + figures in RUN/report/; no root needed)",
               "Where this user may not write into RUN, the report goes under "
               "~/.cache/mrc-testbed/reports/ ($XDG_CACHE_HOME, if set, for ~/.cache) "
               "instead. It also makes the report a run lacks (`mrc-testbed list` names "
               "them)."),
    "compare": ("render runs side by side, e.g. both transports (no root needed)", ""),
    "drill": ("run drills (drills/*.yaml): objectives per transport, a verdict table, "
              "`drills.json`, JUnit XML; exit 5 if one fails",
              "`--judge` runs nothing and judges an earlier drill's runs again, into a folder "
              "of its own: the verdicts the drill wrote when it ran are kept."),
    "calibrate": ("measure this machine's packet budget (agents' and kernel's CPU per packet) "
                  "for `rate: auto`, and cache it",
                  "It builds a 4-host fabric and measures the agents' CPU per delivered packet "
                  "and the kernel's CPU per link crossed (about 10 s)."),
    "clean": ("remove what crashed runs left (their namespaces, processes)",
              "Only what the runs recorded (emulated servers included), nothing else; a run "
              "still running is left alone."),
    "list": ("runs in the results folder, how each ended and whether its report is there; "
             "runs still active",
             "A run whose report is missing (it ended before its report was made, or ran "
             "with `--no-report`) is named with the `mrc-testbed report` command that makes "
             "it."),
    "schema": ("print the scenario JSON Schema (`--drill`: the drill file's, `--meta`: a "
               "results folder's meta.json, `--tables`: its tables' columns)", ""),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrc-testbed", description=DESCRIPTION,
                                epilog=EXIT_STATUS)
    p.add_argument("--version", action=_Version,
                   help="print the package's version (and commit, in a git checkout), exit")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str) -> argparse.ArgumentParser:
        line, more = COMMANDS[name]
        return sub.add_parser(name, help=line,
                              description=f"{line[0].upper()}{line[1:]}. {more}".strip())

    v = command("validate")
    v.add_argument("files", nargs="+", type=Path, metavar="FILE", help="scenario files (YAML)")

    r = command("run")
    r.add_argument("file", nargs="?", type=Path, metavar="FILE",
                   help="scenario file (default: the embedded scenarios/quickstart.yaml)")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--verify-only", action="store_true",
                      help="build, print the verification table, tear down")
    mode.add_argument("--hold", type=_seconds, default=0.0, metavar="SECONDS",
                      help="keep the fabric up this long after verification, instead of "
                           "running the workload")
    mode.add_argument("--cli", action="store_true",
                      help="open Mininet's CLI after verification, instead of running the "
                           "workload (e.g. `h0 ping fd10:1:1::103`)")
    r.add_argument("--results", type=Path, default=results.DEFAULT_BASE,
                   help="folder for run results (default: %(default)s)")
    r.add_argument("--capture", action="append", default=[], metavar="IFNAME",
                   help="write a pcap of this port (e.g. p0s0-eth1) for the workload, in the "
                        "results (headers only, 160 B a packet); repeatable")
    r.add_argument("--require-faithful", action="store_true",
                   help="exit with code 7 when a run's fidelity verdict is not `faithful` "
                        "(its numbers may measure the CPU, not the network); results are kept")
    r.add_argument("--calibrate", action="store_true",
                   help="measure this machine's packet budget and pilot the scenario again "
                        "before the run (what `rate: auto` chooses from; otherwise the cached "
                        "ones are used)")
    r.add_argument("--no-solo", action="store_true",
                   help="with jobs: skip each job's run alone (its control), and with it the "
                        "slowdown the other jobs cost it")
    r.add_argument("--quiet", action="store_true", help="only errors")
    r.add_argument("--no-report", action="store_true",
                   help="skip the report (HTML and figures) and the summary at the end")

    rep = command("report")
    rep.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                     help="results folders of runs (RESULTS/<utc>-<scenario>-<transport>)")
    cmp = command("compare")
    cmp.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                     help="two or more results folders")
    cmp.add_argument("--out", type=Path, default=None, metavar="DIR",
                     help="folder for the comparison (default: <utc>-compare-<scenario>/ beside "
                          "the first run)")

    dr = command("drill")
    dr.add_argument("drills", nargs="+", type=Path, metavar="FILE|DIR",
                    help="drill files, or folders of them")
    dr.add_argument("--results", type=Path, default=results.DEFAULT_BASE,
                    help="folder for the drills' runs and verdicts (default: %(default)s)")
    dr.add_argument("--validate", action="store_true", help="check the drill files, run nothing")
    dr.add_argument("--verbose", action="store_true", help="show each run's phases")
    dr.add_argument("--judge", type=Path, default=None, metavar="DRILLS_DIR",
                    help="run nothing: judge again the runs an earlier `drill` left in this "
                         "folder (results/<utc>-drills), with the drill files' objectives; "
                         "the verdicts go to DRILLS_DIR/judged-<utc>/, the earlier ones stay")

    command("calibrate")
    command("clean")
    ls = command("list")
    ls.add_argument("--results", type=Path, default=results.DEFAULT_BASE,
                    help="folder the runs are in (default: %(default)s)")
    sc = command("schema")
    which = sc.add_mutually_exclusive_group()
    which.add_argument("--drill", action="store_true", help="the drill file's JSON Schema")
    which.add_argument("--meta", action="store_true",
                       help="the JSON Schema of a results folder's meta.json")
    which.add_argument("--tables", action="store_true",
                       help="every column of a results folder's tables: kind, meaning")
    return p


def _require_root(args: argparse.Namespace) -> None:
    """`features.require_root`, its fix naming the command line the user gave (the command
    itself, not always `run`), to repeat with sudo: sudo's PATH leaves out the venv, so the
    program as it was started, a path."""
    try:
        features.require_root()
    except EnvironmentProblem:
        program = (sys.argv[0] if Path(sys.argv[0]).name == "mrc-testbed"
                   else ".venv/bin/mrc-testbed")
        raise EnvironmentProblem(
            f"`mrc-testbed {args.command}` needs root: it makes or removes network "
            f"namespaces and the processes in them",
            f"run it with sudo: `sudo {shlex.join([program, *args.argv])}`") from None


def _cmd_validate(args) -> int:
    """Every file is checked, the bad ones each with its own message; the status is the worst."""
    status = 0
    for file in args.files:
        try:
            sc, _ = scenario.load(file)
            timeline.check(sc, file)
            if not sc.auto_links():
                _check_frame(sc, file)
        except TestbedError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = max(status, exc.exit_code)
            continue
        print(f"ok: {file}: {scenario.describe(sc)}")
        for line in job_lines(sc):
            print(f"  {line}")
        if sc.workload.chakra is not None:
            chakra = sc.workload.chakra
            print(f"  {chakra.loaded_line(chakra.ctrl_deps_dropped(sc.rank_hosts()))}")
        try:
            if sc.auto_links():
                sc = _auto_rate_preview(sc)
                if not sc.auto_links():
                    _check_frame(sc, file)
            _frame_preview(sc)
        except TestbedError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = max(status, exc.exit_code)
            continue
        if sc.cluster is not None and not sc.auto_links():  # before any server is touched
            plan = make_plan(sc)
            for line in place(plan, sc.cluster).describe(plan):
                print(f"  {line}")
    return status


def _check_frame(sc: scenario.Scenario, file: Path) -> None:
    """At the rate the run will have: refused where the emulation cannot apply the stated
    times once dilated, or where the run would pass max_wall_time (as `run` refuses)."""
    feasible.check(sc, str(file))


def _frame_preview(sc: scenario.Scenario) -> None:
    """The time dilation, the emulated links and their latency, each path's BDP and the run's
    wall time with its arithmetic, at the rate the run will have."""
    if sc.auto_links():
        print("  frame: the dilation follows from the rate `run` chooses; the wall time is "
              "checked then")
        if sc.faults:  # the timeline's targets and overlaps were checked: no rate in them
            print(f"  faults: {len(sc.faults)} checked against the fabric (their targets and "
                  f"overlaps are the same at every rate); their times once dilated are "
                  f"checked by `run` at the rate it chooses")
        return
    print(f"  {Frame.of(sc).line(sc)}")
    chosen = algorithm.resolve(sc)
    if chosen.recorded is not None:
        print(f"  algorithm: {algorithm_line(chosen.recorded, chosen.modelled)}")
    for line in [*latency.lines(make_plan(sc)), *timers.lines(sc),
                 *wall_time.estimate(sc).lines()]:
        print(f"  {line}")


def _auto_rate_preview(sc: scenario.Scenario) -> scenario.Scenario:
    """What `run` will do with `rate: auto`, without root: the rate the cached calibration
    and pilot give (and the scenario at it), or what run will measure first."""
    from testbed.emulation import calibration, pilot_readings
    from testbed.fabric import budget
    found, why = calibration.cached()
    if found is None:
        print(f"  rate auto: {why}; `run` will first measure this machine's packet budget "
              f"(`mrc-testbed calibrate`, as root, about 10 s), then pilot the scenario's "
              f"fabric and choose the rate")
        return sc
    print(f"  calibrate: {why}: {found.line()}")
    choice = budget.choose_rate(sc, found.cost())
    for line in choice.lines():
        print(f"  {line}")
    piloted = None if sc.cluster is not None else pilot_readings.cached(sc)
    if piloted is None:
        if sc.cluster is None:
            print(f"  pilot: not yet run for this scenario's shape: `run` will measure it "
                  f"from {format_rate(choice.rate)} (whole iterations after the first, 4-12 s a "
                  f"transport and rung)")
        return sc.with_rate(choice.rate, sc.name)
    for line in piloted.lines():
        print(f"  {line}")
    return sc.with_rate(piloted.rate, sc.name)


def _cmd_calibrate(args) -> int:
    _require_root(args)
    import contextlib

    from testbed.run.calibrate import calibrate
    from testbed.run.runner import preflight
    progress = Progress()
    with contextlib.ExitStack() as held:
        with progress.phase("preflight", "root, Mininet, the run lock, kernel features"):
            preflight(progress, held)
        found = calibrate(progress)
    print(f"calibration: {found.line()}")
    return 0


def _cmd_run(args) -> int:
    _require_root(args)
    from testbed.run.runner import RunOptions, run  # imports Mininet: only when running
    sc, text = scenario.load(args.file)  # the fault timeline: checked by `run` on its plan
    progress = Progress(quiet=args.quiet)
    options = RunOptions(args.results, args.verify_only, args.hold, args.cli,
                         tuple(args.capture), calibrate=args.calibrate,
                         solo=not args.no_solo)
    dirs = run(sc, text, options, progress)
    for d in dirs:
        progress.say(f"done: {d}")
    if not (args.no_report or options.verify_only or options.cli or options.hold > 0):
        _report(dirs, compare=len(dirs) > 1, out=None, progress=progress)
    traffic = not (options.verify_only or options.cli or options.hold > 0)
    if args.require_faithful and traffic:
        _require_faithful(dirs)
    gave = [(m.transport, m.gave_up) for m in map(read_meta, dirs) if m.gave_up] if traffic else []
    for transport, qps in gave:
        print(f"{transport} gave up: {qps[0].line()}"
              + (f", and {len(qps) - 1} more QPs" if len(qps) > 1 else "")
              + "; a job would abort here (a result, not an error: exit status 8)",
              file=sys.stderr)
    if gave:
        return GAVE_UP
    return 0


def _require_faithful(dirs: list[Path]) -> None:
    """Raise `NotFaithful` naming every run whose verdict is not `faithful` (or missing: a run
    that measured no traffic has nothing to vouch for)."""
    bad = []
    for d in dirs:
        fidelity = read_meta(d).fidelity
        if fidelity is None or fidelity.verdict != "faithful":
            why = "; ".join(fidelity.reasons if fidelity else []) or "no traffic was measured"
            bad.append(f"{d.name}: {fidelity.verdict if fidelity else 'no verdict'} ({why})")
    if bad:
        raise NotFaithful("--require-faithful: " + " | ".join(bad),
                          "lower the link rates or the host count (the verdict's reasons say "
                          "what fell behind), or free the machine's CPU")


def _report(dirs: list[Path], compare: bool, out: Path | None, each: bool = True,
            progress: Progress | None = None) -> None:
    """Render each run's report (when `each`) and a comparison of them (when `compare`), then
    print the summary and where the reports are, the last line being the report a reader
    opens first."""
    from analysis import (  # pandas, matplotlib: only when reporting
        render,
        report,
        summary,
    )
    progress = progress or Progress(quiet=True)  # report, compare: the paths say it all
    dirs = [part for d in dirs for part in job_folders(d)]
    with progress.phase("report") as info:
        rendered = [render.render_run(d) for d in dirs] if each else []
        if compare:
            rendered.append(render.render_compare(dirs, out))
        info["done"] = (f"{len(rendered)} report{'s' if len(rendered) > 1 else ''} "
                        f"(notebooks run headless, HTML + PNG/PDF figures)")
    runs = rendered[-1].runs if compare else [run for r in rendered for run in r.runs]
    print(summary.text(report.views_of(runs)), end="")
    for r in rendered:
        print(f"report: {r.html}")


def job_folders(run: Path) -> list[Path]:
    """A run of several jobs reports each job's folder (jobs/<name>, then solo/<name>, its
    control); any other run, itself."""
    try:
        meta = read_meta(run)
    except UserError:
        return [run]  # the report says what is wrong with it
    if not meta.jobs:
        return [run]
    return ([run / "jobs" / j.name for j in meta.jobs]
            + [run / j.solo_run for j in meta.jobs if j.solo_run is not None])


def _cmd_report(args) -> int:
    """A folder the report cannot go to is the machine's (exit 3): `report` has no option
    for where, it is RUN/report/ or the user's cache."""
    from analysis.render import OutputError
    try:
        _report(args.runs, compare=False, out=None)
    except OutputError as exc:
        fix = ("make RUN/report/ a folder this user can write, or point XDG_CACHE_HOME at one "
               "(a report goes there when RUN is not writable)")
        raise EnvironmentProblem(exc.message, _output_hint(exc, fix)) from None
    return 0


def _cmd_compare(args) -> int:
    """A folder the comparison cannot go to is fixed with `--out` (exit 2, as bad input)."""
    from analysis.render import OutputError
    try:
        _report(args.runs, compare=True, out=args.out, each=False)
    except OutputError as exc:
        fix = "give `--out DIR`, a folder you can write (it is made if missing)"
        raise OutputError(exc.message, _output_hint(exc, fix)) from None
    return 0


def _output_hint(exc: UserError, fix: str) -> str:
    """`fix` in place of the analysis's own advice to give another folder, after its advice
    about the folder itself (remove a link)."""
    if exc.hint is None or exc.hint.startswith("give "):
        return fix
    return f"{exc.hint}, or {fix}"


def _cmd_clean(args) -> int:
    _require_root(args)
    problems: list[str] = []
    records = registry.read_all(problems)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not records:
        print("nothing to clean: no run of this testbed left anything")
        return 0
    failed = False
    for record in records:
        if record.runner_alive():
            print(f"{record.run_id}: still running (pid {record.runner_pid}); left alone "
                  f"(stop it with `kill {record.runner_pid}`: it tears down itself)")
            continue
        problems = []
        killed = cleanup.clean_record(record, "crashed: cleaned by `mrc-testbed clean`",
                                      problems)
        servers = (f" and {len(record.named_netns)} namespaces of emulated servers"
                   if record.named_netns else "")
        over_ssh = (f", {len(record.servers)} servers over ssh "
                    f"({', '.join(record.servers)})" if record.servers else "")
        print(f"{record.run_id}: cleaned: {len(record.nodes)} nodes{servers} recorded"
              f"{over_ssh}, {killed} of their processes were still running and were ended")
        for problem in problems:
            print(f"warning: {record.run_id}: {problem}", file=sys.stderr)
        failed |= bool(problems)
    return 3 if failed else 0


def _cmd_list(args) -> int:
    runs = results.list_runs(args.results)
    problems: list[str] = []
    live = {r.run_id: r for r in registry.read_all(problems)}
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not runs and not live:
        print(f"no runs in {args.results}/")
        return 0
    print(f"{'run':<44}{'status':<13}{'duration':>10}  {'report':<9}ended in")
    unreported = []
    for run_dir, meta in runs:
        status: str
        if isinstance(meta, RunMeta):
            status, ended_in = meta.status, meta.ended_in_phase or ""
            rec = live.get(meta.run_id)
            if status == "running" and (rec is None or not rec.runner_alive()):
                status = "crashed?"  # no live run of that id: until `clean` or a run confirms it
            shown = "-" if meta.duration_s is None else f"{meta.duration_s:.1f} s"
        else:  # damaged, or written by a newer testbed: the reason where the phase would be
            status, ended_in, shown = "unreadable", meta.reason, "-"
        report = _report_state(run_dir, status)
        if report == "missing":
            unreported.append(str(run_dir))
        print(f"{run_dir.name:<44}{status[:12]:<13}{shown:>10}  {report:<9}{ended_in[:40]}")
    if unreported:
        print(f"\n{len(unreported)} run{'s' if len(unreported) > 1 else ''} without a report "
              f"(the run ended before its report was made, or ran with --no-report); to make "
              f"{'them' if len(unreported) > 1 else 'it'}:\n"
              f"  mrc-testbed report {shlex.join(unreported)}")
    return 0


def _report_state(run_dir: Path, status: str) -> str:
    """"yes" where the run's report.html is, "missing" where the run has the tables a report
    needs but no report, "-" where there is nothing to report (still running, or no workload
    ran: --verify-only, --hold, a run that stopped before it)."""
    from runcontract import REQUIRED_TABLES, table_file
    if status in ("running", "unreadable") or not all(
            (run_dir / table_file(t)).is_file() for t in REQUIRED_TABLES):
        return "-"
    from analysis.render import existing_report  # pandas: only when a run could have one
    return "yes" if existing_report(run_dir) is not None else "missing"


def _cmd_schema(args) -> int:
    from runcontract import meta, tables
    from testbed.scenario import drill
    schema = (drill.json_schema() if args.drill else meta.json_schema() if args.meta
              else tables.description() if args.tables else scenario.json_schema())
    print(json.dumps(schema, indent=2))
    return 0


def _cmd_drill(args) -> int:
    """Run drills, judge them, print and write the table; exit 0, 5 or 6 (module docstring)."""
    from testbed.run.drill import check
    from testbed.scenario.drill import DrillTransport, drill_files, load_drill
    drills = [load_drill(f) for f in drill_files(args.drills)]
    check(drills)
    if args.validate:
        controls = {"every_seed": " + a control per seed", "first_seed": " + a control on the "
                    "first seed", "none": ""}
        for d in drills:
            seeds = d.drill.run_seeds(d.scenario)
            print(f"ok: {d.source}: {d.drill.name}: {', '.join(d.transports)} x "
                  f"{d.drill.repetitions} (seed{'s' if len(seeds) > 1 else ''} "
                  f"{', '.join(map(str, seeds))})"
                  f"{controls[d.drill.control]}; "
                  f"{scenario.describe(d.scenario)}")
        return 0
    from analysis import drill_report  # pandas: only when judging
    if args.judge is not None:
        from testbed.run.drill import found
        base = args.judge
        done = found(drills, base)
    else:
        _require_root(args)
        from testbed.run.drill import run_drills
        base = args.results / time.strftime("%Y%m%dT%H%M%SZ-drills", time.gmtime())
        done = run_drills(drills, base, Progress(), show_runs=args.verbose)
    verdicts = []
    for t in done:
        stated = t.drill.drill.objectives
        spec = stated.get(cast(DrillTransport, t.transport))  # one of the drill's transports
        other = next(iter(stated.values()), None)  # a contrast row is measured against these
        verdicts.append(drill_report.judge(
            t.drill.drill.name, t.transport, t.repetitions, t.controls,
            spec.model_dump() if spec is not None else None, t.drill.drill.source, t.errors,
            contrast=other.model_dump() if other is not None else None,
            report=t.drill.drill.report, paired=t.paired))
    out = base if args.judge is None else _judgement_folder(base, time.gmtime())
    files = drill_report.write(verdicts, out)
    print(drill_report.table(verdicts), end="")
    for f in files:
        print(f"drills: {f}")
    if out != base:
        kept = [n for n in ("drills.txt", "drills.json", "junit.xml") if (base / n).is_file()]
        print(f"judged again: the verdicts above are in {out}/; "
              + (f"those of the drill as it ran stay in {base}/ ({', '.join(kept)})" if kept
                 else f"the drill as it ran left none in {base}/"))
    return drill_report.exit_status(verdicts)


def _judgement_folder(base: Path, now: time.struct_time) -> Path:
    """`base/judged-<utc>/`, new, for the verdicts of `drill --judge`: the judgement made when
    the drill ran (base/drills.txt, drills.json, junit.xml) is its record and stays as it was,
    and every later judgement (other objectives, runs judged faithful since) has its own."""
    stem = time.strftime("judged-%Y%m%dT%H%M%SZ", now)
    for n in range(100):
        folder = base / (stem + (f"-{n}" if n else ""))
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot write the verdicts in {base}: {exc.strerror or exc}",
                "judge as the user who ran the drill (sudo, for a drill run as root)") from None
    raise EnvironmentProblem(f"{base}: 100 judgements named {stem}[-N] exist already",
                             "wait a second, or remove old judged-* folders")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given, for hints
    handler = {"validate": _cmd_validate, "run": _cmd_run, "report": _cmd_report,
               "compare": _cmd_compare, "clean": _cmd_clean, "list": _cmd_list,
               "schema": _cmd_schema, "drill": _cmd_drill,
               "calibrate": _cmd_calibrate}[args.command]
    try:
        return handler(args)
    except UserError as exc:  # the testbed's errors and the analysis's
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Interrupted (a signal during a run) or a bare Ctrl-C
        print(f"error: {exc or 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout's reader left (`| head`): what it wanted, it has
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 128 + signal.SIGPIPE
    except Exception as exc:  # a bug: say so plainly, traceback on request
        if args.debug:
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
              f"traceback, and please report it)", file=sys.stderr)
        return 1


def command() -> int:
    """The process's entry: `main`, with signals handled for the whole process (a signal
    between two steps of `main` ends it with 130, and one after it changes nothing)."""
    try:
        interrupts.for_process()
        status = main()
    except KeyboardInterrupt as exc:  # between `main`'s own handling and its return
        print(f"error: {exc or 'interrupted'}", file=sys.stderr)
        status = 130
    interrupts.at_exit()
    return status


if __name__ == "__main__":
    sys.exit(command())
