"""Executing the report notebooks headless (papermill) and writing them as one HTML file.

The notebooks are the report's source: a user can open `report.ipynb` in Jupyter and change
anything. Here they run in a kernel of this very Python (the venv's `python3` kernel spec of
ipykernel, which jupyter_client points at `sys.executable`), so a fresh clone needs nothing
but `pip install -r requirements.txt`. The HTML embeds every figure (base64 PNG) and hides the
code: a reader looks at plots, and a paper takes the PNG/PDF files beside it.
"""
from __future__ import annotations

import re
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


class RenderError(UserError):
    """A report notebook failed: a bug in analysis, or data it did not expect."""


@dataclass(frozen=True)
class Rendered:
    html: Path
    figures: list[Path]  # every PNG and PDF written
    runs: list[Run]


def _execute(notebook: str, parameters: dict, out_dir: Path, expected: tuple[str, ...],
             runs: list[Run]) -> Rendered:
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / "report.ipynb"
    try:
        papermill.execute_notebook(NOTEBOOKS / notebook, executed, parameters=parameters,
                                   kernel_name=KERNEL, progress_bar=False, log_output=False,
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
    html.write_text(body)
    missing = [n for n in expected if not (out_dir / f"{n}.png").exists()]
    if missing:
        raise RenderError(f"{notebook} ran but wrote no {', '.join(missing)} figure "
                          f"(in {out_dir})")
    figures = sorted(p for p in out_dir.iterdir() if p.suffix in (".png", ".pdf"))
    return Rendered(html, figures, runs)


def render_run(run_dir: str | Path, out_dir: str | Path | None = None) -> Rendered:
    """The report of one run, by default in its folder's `report/`."""
    runs = load_runs([run_dir])
    out = Path(out_dir) if out_dir is not None else runs[0].dir / "report"
    return _execute("run_report.ipynb", {"run_dir": str(runs[0].dir.resolve()),
                                         "out_dir": str(out.resolve())}, out, RUN_FIGURES,
                    runs)


def default_compare_dir(runs: list[Run]) -> Path:
    """Beside the first run: `<utc>-compare-<scenario>/`, so that `mrc-testbed list` order
    puts it after the runs it compares."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return runs[0].dir.parent / f"{stamp}-compare-{runs[0].facts.scenario}"


def render_compare(run_dirs: list[str | Path], out_dir: str | Path | None = None) -> Rendered:
    """Runs side by side (typically one scenario over both transports)."""
    if len(run_dirs) < 2:
        raise RunError("compare needs at least two runs")
    runs = load_runs(run_dirs)
    out = Path(out_dir) if out_dir is not None else default_compare_dir(runs)
    return _execute("compare_report.ipynb",
                    {"run_dirs": [str(r.dir.resolve()) for r in runs],
                     "out_dir": str(out.resolve())}, out, COMPARE_FIGURES, runs)
