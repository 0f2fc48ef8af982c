"""`mrc-testbed`: validate, run, report, compare, clean, list, schema.

Exit status: 0 fine, 1 internal error, 2 invalid scenario or arguments, 3 machine cannot run
it (not root, kernel feature missing, another run active), 4 fabric failed verification,
5 a run's fidelity verdict was not `faithful` (only with `run --require-faithful`),
130 interrupted. Errors print as one message (no traceback unless --debug).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from runcontract import META, UserError
from testbed import scenario
from testbed.errors import NotFaithful, TestbedError
from testbed.fabric import timeline
from testbed.kernel import features
from testbed.lifecycle import cleanup, registry
from testbed.lifecycle.progress import Progress
from testbed.run import results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrc-testbed", description=__doc__.splitlines()[0])
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="check scenario files, build nothing")
    v.add_argument("files", nargs="+", type=Path)

    r = sub.add_parser("run", help="build a scenario's fabric, verify every path, then hold")
    r.add_argument("file", nargs="?", type=Path,
                   help="scenario file (default: the embedded scenarios/quickstart.yaml)")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--verify-only", action="store_true",
                      help="build, print the verification table, tear down")
    mode.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                      help="keep the fabric up this long after verification")
    mode.add_argument("--cli", action="store_true", help="open Mininet's CLI after verification")
    r.add_argument("--results", type=Path, default=results.DEFAULT_BASE,
                   help="folder for run results (default: %(default)s)")
    r.add_argument("--capture", action="append", default=[], metavar="IFNAME",
                   help="write a pcap of this port (e.g. p0s0-eth1) for the workload; repeatable")
    r.add_argument("--require-faithful", action="store_true",
                   help="exit with code 5 when a run's fidelity verdict is not `faithful` "
                        "(its numbers may measure the CPU, not the network); results are kept")
    r.add_argument("--quiet", action="store_true", help="only errors")
    r.add_argument("--no-report", action="store_true",
                   help="skip the report (HTML and figures) and the summary at the end")

    rep = sub.add_parser("report", help="render each run's report (HTML + figures in RUN/report/)")
    rep.add_argument("runs", nargs="+", type=Path, metavar="RUN")
    cmp = sub.add_parser("compare", help="render runs side by side (e.g. both transports)")
    cmp.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                     help="two or more results folders")
    cmp.add_argument("--out", type=Path, default=None,
                     help="folder for the comparison (default: <utc>-compare-<scenario>/ beside "
                          "the first run)")

    sub.add_parser("clean", help="remove what crashed runs left (their namespaces, processes)")
    ls = sub.add_parser("list", help="runs in the results folder, and runs still active")
    ls.add_argument("--results", type=Path, default=results.DEFAULT_BASE)
    sub.add_parser("schema", help="print the scenario JSON Schema")
    return p


def _cmd_validate(args) -> int:
    for file in args.files:
        sc, _ = scenario.load(file)
        timeline.check(sc, file)
        print(f"ok: {file}: {scenario.describe(sc)}")
    return 0


def _cmd_run(args) -> int:
    features.require_root()
    from testbed.run.runner import RunOptions, run  # imports Mininet: only when running
    if args.hold < 0:
        raise TestbedError("--hold must be 0 or more seconds")
    sc, text = scenario.load(args.file)
    timeline.check(sc, args.file or "quickstart")
    progress = Progress(quiet=args.quiet)
    options = RunOptions(args.results, args.verify_only, args.hold, args.cli,
                         tuple(args.capture))
    dirs = run(sc, text, options, progress)
    for d in dirs:
        progress.say(f"done: {d}")
    if not (args.no_report or options.verify_only or options.cli or options.hold > 0):
        _report(dirs, compare=len(dirs) > 1, out=None, progress=progress)
    traffic = not (options.verify_only or options.cli or options.hold > 0)
    if args.require_faithful and traffic:
        _require_faithful(dirs)
    return 0


def _require_faithful(dirs: list[Path]) -> None:
    """Raise `NotFaithful` naming every run whose verdict is not `faithful` (or missing: a run
    that measured no traffic has nothing to vouch for)."""
    bad = []
    for d in dirs:
        verdict = (json.loads((d / META).read_text()).get("fidelity") or {})
        if verdict.get("verdict") != "faithful":
            why = "; ".join(verdict.get("reasons", [])) or "no traffic was measured"
            bad.append(f"{d.name}: {verdict.get('verdict', 'no verdict')} ({why})")
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


def _cmd_report(args) -> int:
    _report(args.runs, compare=False, out=None)
    return 0


def _cmd_compare(args) -> int:
    _report(args.runs, compare=True, out=args.out, each=False)
    return 0


def _cmd_clean(_args) -> int:
    features.require_root()
    records = registry.read_all()
    if not records:
        print("nothing to clean: no run of this testbed left anything")
        return 0
    for record in records:
        if record.runner_alive():
            print(f"{record.run_id}: still running (pid {record.runner_pid}); left alone "
                  f"(stop it with `kill {record.runner_pid}`: it tears down itself)")
            continue
        killed = cleanup.clean_record(record, "crashed: cleaned by `mrc-testbed clean`")
        print(f"{record.run_id}: cleaned: {len(record.nodes)} nodes recorded, {killed} of their "
              f"processes were still running and were ended")
    return 0


def _cmd_list(args) -> int:
    runs = results.list_runs(args.results)
    live = {r.run_id: r for r in registry.read_all()}
    if not runs and not live:
        print(f"no runs in {args.results}/")
        return 0
    print(f"{'run':<44}{'status':<13}{'duration':>10}  ended in")
    for meta in runs:
        status = meta.get("status", "?")
        rec = live.get(meta.get("run_id"))
        if status == "running" and rec is not None and not rec.runner_alive():
            status = "crashed?"  # until `clean` or the next run confirms it
        duration = f"{meta['duration_s']:.1f} s" if meta.get("duration_s") is not None else "-"
        print(f"{Path(meta['dir']).name:<44}{status:<13}{duration:>10}  "
              f"{meta.get('ended_in_phase') or ''}")
    return 0


def _cmd_schema(_args) -> int:
    print(json.dumps(scenario.json_schema(), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"validate": _cmd_validate, "run": _cmd_run, "report": _cmd_report,
               "compare": _cmd_compare, "clean": _cmd_clean, "list": _cmd_list,
               "schema": _cmd_schema}[args.command]
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
    except Exception as exc:  # a bug: say so plainly, traceback on request
        if args.debug:
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
              f"traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
