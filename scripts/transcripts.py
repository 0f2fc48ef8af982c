"""Run the commands the docs show and write what they printed into the pages, stamped with the
commit and the date (`sudo make transcripts`; root, one fabric at a time).

A page holds a transcript between two markers:

    <!-- transcript: quickstart -->
    ...written here...
    <!-- /transcript -->

Each transcript below names its command and the part of the output a page shows (all of it,
or the summary from its first table header on). The command's stdout and stderr are captured
together, as a terminal shows them, and a page is written only when the command succeeded.
`tests/unit/test_transcripts.py` checks every line of every transcript against the text the
code can print, so a page cannot go on showing a line the CLI no longer prints.

    sudo .venv/bin/python scripts/transcripts.py [NAME...] [--list]
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = ".venv/bin/mrc-testbed"
BEGIN = "<!-- transcript: {name} -->"
END = "<!-- /transcript -->"
BLOCK = re.compile(r"<!-- transcript: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /transcript -->",
                   re.S)
FENCE = "``` {.text .transcript}"


@dataclass(frozen=True)
class Transcript:
    name: str
    command: tuple[str, ...]  # run from the repository's top, as shown (CLI is the venv's)
    pages: dict[str, str]  # page -> "all" or "summary" (from the summary's first line on)
    root: bool = True


TRANSCRIPTS = (
    Transcript("quickstart", (CLI, "run"),
               {"docs/quickstart.md": "all", "README.md": "summary"}),
    Transcript("first-fault", (CLI, "run", "scenarios/link-down.yaml"),
               {"docs/tutorials/first-fault.md": "summary"}),
    Transcript("drill-validate", (CLI, "drill", "drills/smoke.yaml", "--validate"),
               {"docs/tutorials/writing-a-drill.md": "all"}, root=False),
)
# The summary printed after every transport's run: the first line of it.
SUMMARY_START = re.compile(r"^# \w+ of \d+ B on \d+ ranks \(")


def summary(lines: list[str]) -> list[str]:
    """The summary at the end of a run's output: from the last summary header on."""
    starts = [i for i, line in enumerate(lines) if SUMMARY_START.match(line)]
    if not starts:
        raise SystemExit("no run summary in the output (a line like "
                         "'# all_reduce of 1048576 B on 4 ranks (quickstart)')")
    return lines[starts[-1]:]


def block(t: Transcript, lines: list[str], commit: str, when: str) -> str:
    sudo = "sudo " if t.root else ""
    return (f"{BEGIN.format(name=t.name)}\n{FENCE}\n" + "".join(f"{line}\n" for line in lines)
            + f"```\n\nPrinted by `{sudo}{' '.join(t.command)}` at commit {commit}, {when} "
            f"(`make transcripts` runs it again).\n{END}")


def write(page: Path, name: str, text: str) -> None:
    content = page.read_text()
    matches = [m for m in BLOCK.finditer(content) if m.group("name") == name]
    if len(matches) != 1:
        raise SystemExit(f"{page.relative_to(ROOT)}: expected one '{BEGIN.format(name=name)}' "
                         f"... '{END}' block, found {len(matches)}")
    m = matches[0]
    page.write_text(content[:m.start()] + text + content[m.end():])


def commit() -> str:
    """The commit whose code printed the transcript, `-dirty` when that code had uncommitted
    changes. Pages (Markdown, docs/) and tests print nothing, so their changes do not count:
    the transcripts can be written into pages being edited and committed with them."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.strip()
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  ":(exclude)*.md", ":(exclude)docs", ":(exclude)tests",
                  ":(exclude)scripts/transcripts.py")
    return git("rev-parse", "--short=7", "HEAD") + ("-dirty" if changed else "")


def run(t: Transcript) -> list[str]:
    if t.root and os.geteuid() != 0:
        raise SystemExit(f"{t.name}: `{' '.join(t.command)}` needs root (sudo make transcripts)")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    print(f"{t.name}: {' '.join(t.command)}", file=sys.stderr, flush=True)
    done = subprocess.run(t.command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    sys.stderr.write(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"{t.name}: exit status {done.returncode}; no page written")
    return [line.rstrip() for line in done.stdout.splitlines()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="transcripts to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list them and their pages")
    args = parser.parse_args(argv)
    chosen = [t for t in TRANSCRIPTS if not args.names or t.name in args.names]
    unknown = set(args.names) - {t.name for t in TRANSCRIPTS}
    if unknown:
        parser.error(f"no transcript named {', '.join(sorted(unknown))}")
    if args.list:
        for t in chosen:
            print(f"{t.name}: {' '.join(t.command)} -> {', '.join(t.pages)}")
        return 0
    stamp = commit()  # before the first page is written, which makes the tree dirty
    for t in chosen:
        lines = run(t)
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        for page, part in t.pages.items():
            write(ROOT / page, t.name, block(t, summary(lines) if part == "summary" else lines,
                                             stamp, when))
            print(f"{t.name}: wrote {page}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
