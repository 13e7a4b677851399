"""Write every report file of one analysed run into a folder (default ``<run_dir>/report/``).

Files (:data:`REPORT_FILES`): ``record.csv``, ``record.md``, ``knee.json``,
``recommendations.yaml``, ``latency.png``, ``throughput.png``, ``timeline.png`` and the
self-contained ``report.html`` that embeds the PNGs; then the cluster files chosen with
``--emit`` (:mod:`analysis.cluster.emit`), linked from the page. :func:`report_paths`
(:mod:`analysis.report.paths`) names them before they are written, so the terminal can show the
answer (and where the report will be) first. The PNGs are drawn by a
:class:`~analysis.report.painter.Painter` (``loadknee analyze``'s: a child process) while the
other files are written. The texts shared with the terminal are in :mod:`analysis.report.texts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from analysis.cluster.emit import (
    EMITTERS,
    LLMD_DIR,
    ClusterParams,
    html_section,
    write_cluster_files,
)
from analysis.pipeline import Analysis
from analysis.predict.around import around_the_run
from analysis.report.answer_view import answer_view, capacity_words
from analysis.report.html import HtmlReport, render_html
from analysis.report.html_params import redact
from analysis.report.knee_json import analysis_json
from analysis.report.knee_summary import summary_words
from analysis.report.painter import Painter, PlotInputs
from analysis.report.paths import (  # noqa: F401 (report_paths: its old import path)
    REPORT_FILES,
    cluster_params,
    report_dir,
    report_paths,
)
from analysis.report.rate_words import rate_knee_text
from analysis.report.screen import why_line
from analysis.report.slo_words import classes_text
from analysis.report.standing import cannot_tell_text
from analysis.report.table import format_csv, format_markdown, record_frame
from analysis.report.texts import (  # noqa: F401 (collect_warnings: its old import path)
    collect_warnings,
    recommendations_text,
    slo_text,
)
from analysis.report.whatif_html import whatif_html
from analysis.report.workload import workload_html, workload_sections
from analysis.report.workload_words import hit_miss_line, report_note, turn_lines
from analysis.slo.classes import analyze_classes
from analysis.stages.conversations import planned_turns

#: the page's why line holds as many of the binding stage's figures as this many characters
WHY_WIDTH = 200


def _page_why(analysis: Analysis) -> str:
    """The page's line of why: the screen's own "cannot tell" words where the run has no
    answer (the page showed the point figures' why under a "deploy: none" tile and never said
    it could not tell, while the screen did), else the figures that bound the answer."""
    if analysis.standing.cannot_tell:
        return cannot_tell_text(analysis.standing, analysis.knee)
    return why_line(analysis, width=WHY_WIDTH).removeprefix("why: ")


def answer_markdown(analysis: Analysis) -> str:
    """record.md's first line: the deploy figure and the capacity as every output says them, or
    the screen's "cannot tell" words where the run has no answer ("" when there is no figure to
    deploy): the knee's summary under it names the stages' point figure, which alone would
    read as the answer."""
    recs = analysis.recommendations
    if analysis.standing.cannot_tell:
        said = cannot_tell_text(analysis.standing, analysis.knee).removeprefix("cannot tell: ")
        return f"**cannot tell**: {said}\n\n"
    if recs.deploy is None or recs.deploy.users is None:
        return ""
    view = answer_view(analysis.knee, recs)
    return f"**deploy {view.deploy}** concurrent requests; {capacity_words(view)}\n\n"


def record_markdown(analysis: Analysis) -> str:
    record = record_frame(analysis.summary, analysis.knee, analysis.slo, analysis.rate_stages)
    slo = "" if analysis.slo is None else slo_text(analysis.slo).replace("\n", "  \n") + "\n\n"
    if analysis.rate_knee is not None:
        slo += rate_knee_text(analysis.rate_knee) + "\n\n"
    cache = report_note(analysis.run.server_metrics, analysis.run.run_info)
    slo += f"{cache}\n\n" if cache else ""
    users = dict(zip(analysis.summary["stage"], analysis.summary["target_users"], strict=True))
    hits = hit_miss_line(analysis.run.requests, users)
    slo += f"{hits}\n\n" if hits else ""
    by_turn = turn_lines(analysis.run.requests, planned_turns(analysis.run.run_info))
    slo += "\n".join(by_turn) + "\n\n" if by_turn else ""
    classes = analyze_classes(analysis.run, analysis.knee)
    slo += classes_text(classes).replace("\n", "  \n") + "\n\n" if classes else ""
    return (
        f"# Record table — {analysis.run_id}\n\n{answer_markdown(analysis)}"
        f"{summary_words(analysis.knee)}\n\n{slo}" + format_markdown(record)
    )


def drop_cluster_files(out: Path) -> None:
    """Remove the cluster files an earlier analysis wrote into ``out``: beside a "cannot tell"
    they would read as this run's answer."""
    for emitter in EMITTERS.values():
        (out / emitter.file).unlink(missing_ok=True)
    for report in (out / LLMD_DIR).glob("stage_*_benchmark_report_v0_2.yaml"):
        report.unlink()


def write_report(
    analysis: Analysis,
    out_dir: str | Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    cluster: ClusterParams | None = None,
    painter: Painter | None = None,
) -> dict[str, Path]:
    """Write all report files; returns file name → path. ``out_dir`` defaults to run/report.

    ``cluster``: which cluster files to write beside them (default: all of them). ``painter``:
    what draws the PNGs (default: this process, before the other files); given one started
    earlier (:meth:`Painter.start`), its child draws them while this writes the rest (sent the
    plots here, unless the caller did already), and an error of the child's is raised here
    (:class:`~analysis.report.painter.PaintError`)."""
    say = progress or (lambda _msg: None)
    out = report_dir(analysis, out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say("drawing plots")
    painter = painter or Painter()
    if not painter.has_job:  # else the caller handed it the plots already (loadknee analyze)
        painter.draw(PlotInputs.of(analysis), out)
    record = record_frame(analysis.summary, analysis.knee, analysis.slo, analysis.rate_stages)
    workload = workload_sections(analysis)
    texts = {
        "record.csv": format_csv(record),
        "record.md": record_markdown(analysis),
        "knee.json": analysis_json(analysis, rates=True, workload=workload),
        "recommendations.yaml": analysis.recommendations_yaml,
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = out / name
        paths[name].write_text(text, encoding="utf-8")
    say("writing the cluster files")
    if analysis.standing.cannot_tell:  # no answer: no cluster file, not even an earlier one
        drop_cluster_files(out)
    cluster_paths = write_cluster_files(analysis, out, cluster_params(analysis, cluster))
    page = HtmlReport(
        run_id=analysis.run_id,
        record=record,
        knee=analysis.knee,
        baseline=analysis.baseline,
        recommendations=analysis.recommendations,
        recommendations_yaml=analysis.recommendations_yaml,
        run_info=redact(analysis.run.run_info),
        images={},
        warnings=collect_warnings(analysis),
        slo=analysis.slo,
        cluster_html=html_section(analysis, cluster_paths),
        watermark_share=(
            analysis.recommend_params.watermark_low,
            analysis.recommend_params.watermark_high,
        ),
        workload_html=workload_html(workload),
        why=_page_why(analysis),
        whatif_html=whatif_html(around_the_run(analysis), analysis.knee.max_concurrency),
    )
    images = {}
    for name, title in painter.result().items():  # the page embeds them: wait for them
        paths[name] = out / name
        images[title] = paths[name].read_bytes()
    paths.update(cluster_paths)
    page = replace(page, images=images)
    paths["report.html"] = out / "report.html"
    paths["report.html"].write_text(render_html(page), encoding="utf-8")
    return paths
