"""Executing the report notebooks headless (papermill) and writing them as one HTML file.

The notebooks are the report's source: a user can open `report.ipynb` in Jupyter and change
anything. Here they run in a kernel of this very Python (the venv's `python3` kernel spec of
ipykernel, which jupyter_client points at `sys.executable`), so a fresh clone needs nothing
but `pip install -r requirements.txt`. The HTML embeds every figure (base64 PNG) and hides the
code: a reader looks at plots, and a paper takes the PNG/PDF files beside it.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from runcontract import UserError

from .load import Run, RunError, load_runs

NOTEBOOKS = Path(__file__).resolve().parent
KERNEL = "python3"
# Figures every report has; a comparison adds one EV state timeline per run (ev_states-LABEL).
RUN_FIGURES = ("cct_cdf", "goodput", "utilisation", "busbw", "ev_states", "counters",
               "fidelity")
COMPARE_FIGURES = ("cct_cdf", "goodput", "utilisation", "busbw", "counters")
# Training-step runs (steps.parquet) have their own notebook, for one run or several; it adds a
# timeline per run (timeline, or timeline-LABEL side by side).
STEPS_FIGURES = ("step_times",)


class RenderError(UserError):
    """A report notebook failed: a bug in analysis, or data it did not expect."""


class OutputError(RenderError):
    """The report's folder cannot be made or written (the one asked for, or the default):
    the user chooses another, so not a bug (exit status 2, as for other bad input)."""

    exit_code = 2


@dataclass(frozen=True)
class Rendered:
    html: Path
    figures: list[Path]  # every PNG and PDF written
    runs: list[Run]


@contextlib.contextmanager
def _safe_kernel_path() -> Iterator[None]:
    """The kernel is `python -m ipykernel_launcher`, which puts its working directory first on
    sys.path, and `report` may run as root from anywhere: an `analysis/` planted in the
    directory would be imported instead of ours. PYTHONSAFEPATH (Python 3.11's -P) keeps it
    off; the kernel inherits this process's environment, so it is set around the run only."""
    previous = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = previous


def _execute(notebook: str, parameters: dict, out_dir: Path, expected: tuple[str, ...],
             runs: list[Run]) -> Rendered:
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    _prepare(out_dir)
    executed = out_dir.resolve() / "report.ipynb"
    try:
        with _safe_kernel_path():
            papermill.execute_notebook(NOTEBOOKS / notebook, executed, parameters=parameters,
                                       kernel_name=KERNEL, progress_bar=False, log_output=False,
                                       cwd=str(NOTEBOOKS),
                                       extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except papermill.PapermillExecutionError as exc:
        raise RenderError(f"{notebook} failed in cell {exc.exec_count}: {exc.ename}: "
                          f"{exc.evalue} (the notebook as far as it ran: {executed})") from None
    exporter = HTMLExporter(template_name="classic", exclude_input=True,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    # The template loads jQuery, require.js and mermaid from CDNs for widgets and diagrams; the
    # report has neither, so they go, and the file reads the same offline.
    body = re.sub(r"<script[^>]*>(?:(?!</script>).)*?https://cdnjs(?:(?!</script>).)*</script>|"
                  r"<script[^>]*\ssrc=\"https?://[^\"]*\"[^>]*>\s*</script>", "", body,
                  flags=re.IGNORECASE | re.DOTALL)
    html = out_dir / "report.html"
    _write_atomic(html, body)
    missing = [n for n in expected if not (out_dir / f"{n}.png").exists()]
    if missing:
        raise RenderError(f"{notebook} ran but wrote no {', '.join(missing)} figure "
                          f"(in {out_dir})")
    figures = sorted(p for p in out_dir.iterdir() if p.suffix in (".png", ".pdf"))
    return Rendered(html, figures, runs)


def _prepare(out: Path) -> None:
    """The report's folder: made if missing; refused if it, or anything in it, is a symlink
    (`report` may run as root: a planted link would be written through), or if it is a file."""
    if out.is_symlink():
        raise OutputError(f"{out}: a symbolic link; a report is written only into a real "
                          f"folder", "remove the link, or write the report elsewhere")
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder",
                          "give the path of a folder (it is made if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make the report folder {out}: {exc.strerror}",
                          "give a folder you can write") from None
    links = [p.name for p in out.iterdir() if p.is_symlink()]
    if links:
        raise OutputError(f"{out}: holds symbolic links ({', '.join(sorted(links)[:5])}); a "
                          f"report never writes through one", "remove them")
    if not os.access(out, os.W_OK):
        raise OutputError(f"{out}: not writable by this user",
                          "give a folder you can write")


def _write_atomic(path: Path, text: str) -> None:
    """A temporary file in the same folder renamed over `path`: never through a symlink, never
    half written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def user_reports_dir() -> Path:
    """Where reports go when the run's folder is not writable by this user (a run made by root,
    `report` run by a user): $XDG_CACHE_HOME/mrc-testbed/reports, else ~/.cache/..."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mrc-testbed" / "reports"


def _writable_beside(folder: Path, name: str) -> Path:
    """`folder/name` when this user may write there (or make it), else the same name under
    user_reports_dir()."""
    target = folder / name
    probe = target if target.exists() else folder
    return target if os.access(probe, os.W_OK) else user_reports_dir() / folder.name / name


def existing_report(run_dir: Path) -> Path | None:
    """The run's report.html where `render_run` writes it (the run's report/, or this user's
    cache when the run's folder was not writable), or None: not made yet, or a rendering that
    was cut short (the HTML is written last)."""
    for folder in (run_dir / "report", user_reports_dir() / run_dir.name / "report"):
        if (folder / "report.html").is_file():
            return folder / "report.html"
    return None


def render_run(run_dir: str | Path, out_dir: str | Path | None = None) -> Rendered:
    """The report of one run, by default in its folder's `report/` (or, where this user may
    not write there, in user_reports_dir())."""
    runs = load_runs([run_dir])
    out = Path(out_dir) if out_dir is not None else _writable_beside(runs[0].dir, "report")
    if _steps(runs):
        return _execute_steps(runs, out)
    return _execute("run_report.ipynb", {"run_dir": str(runs[0].dir.resolve()),
                                         "out_dir": str(out.resolve())}, out, RUN_FIGURES,
                    runs)


def default_compare_dir(runs: list[Run]) -> Path:
    """Beside the first run: `<utc>-compare-<scenario>/`, so that `mrc-testbed list` order
    puts it after the runs it compares."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    parent = runs[0].dir.parent
    scenario = re.sub(r"[^A-Za-z0-9_.-]", "_", str(runs[0].facts.scenario))[:40].lstrip(".")
    name = f"{stamp}-compare-{scenario}"  # meta.json is data: no '/' or '..' from it
    return parent / name if os.access(parent, os.W_OK) else user_reports_dir() / name


def render_compare(run_dirs: Sequence[str | Path], out_dir: str | Path | None = None) -> Rendered:
    """Runs side by side (typically one scenario over both transports)."""
    if len(run_dirs) < 2:
        raise RunError("compare needs at least two runs")
    runs = load_runs(list(run_dirs))
    out = Path(out_dir) if out_dir is not None else default_compare_dir(runs)
    if _steps(runs):
        return _execute_steps(runs, out)
    return _execute("compare_report.ipynb",
                    {"run_dirs": [str(r.dir.resolve()) for r in runs],
                     "out_dir": str(out.resolve())}, out, COMPARE_FIGURES, runs)


def _steps(runs: list[Run]) -> bool:
    """Training-step runs (their iterations are steps, not one collective)."""
    return all("steps" in r.tables and not r.tables["steps"].empty for r in runs)


def _execute_steps(runs: list[Run], out: Path) -> Rendered:
    return _execute("steps_report.ipynb", {"run_dirs": [str(r.dir.resolve()) for r in runs],
                                           "out_dir": str(out.resolve())}, out, STEPS_FIGURES,
                    runs)
