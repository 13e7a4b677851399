"""Where each report file of one analysed run goes, known before any is written.

``loadknee analyze`` prints the answer, which says where the report is (and, with
``--explain``, every file in it), before it writes the files: this module names them without
loading what writes them (:mod:`analysis.report.writer`: the page, the cluster renderers, the
plots), so the answer does not wait on those imports.
"""

from __future__ import annotations

from pathlib import Path

from analysis.cluster.plan import ClusterParams, planned_files
from analysis.pipeline import Analysis

REPORT_FILES: tuple[str, ...] = (
    "record.csv",
    "record.md",
    "knee.json",
    "recommendations.yaml",
    "latency.png",
    "throughput.png",
    "timeline.png",
    "interactivity.png",
    "report.html",
)


def report_dir(analysis: Analysis, out_dir: str | Path | None = None) -> Path:
    """The report folder: ``out_dir``, else the run directory's ``report/``."""
    return Path(out_dir) if out_dir is not None else analysis.run.path / "report"


def cluster_params(analysis: Analysis, cluster: ClusterParams | None) -> ClusterParams:
    """The cluster files to write: none beside a "cannot tell" (they would read as an answer)."""
    if analysis.standing.cannot_tell:
        return ClusterParams(emit=())
    return cluster or ClusterParams()


def report_paths(
    analysis: Analysis, out_dir: str | Path | None = None, cluster: ClusterParams | None = None
) -> dict[str, Path]:
    """File name → path of every file :func:`~analysis.report.writer.write_report` writes,
    known before it writes one: ``loadknee analyze`` prints the answer, which says where the
    report is, before the files."""
    out = report_dir(analysis, out_dir)
    names = [
        *(n for n in REPORT_FILES if n != "report.html"),
        *planned_files(analysis, cluster_params(analysis, cluster)),
        "report.html",
    ]
    return {name: out / name for name in names}
