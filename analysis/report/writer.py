"""Write every report file of one analysed run into a folder (default ``<run_dir>/report/``).

Files (:data:`REPORT_FILES`): ``record.csv``, ``record.md``, ``knee.json``,
``recommendations.yaml``, ``latency.png``, ``throughput.png``, ``timeline.png`` and the
self-contained ``report.html`` that embeds the three PNGs; then the cluster files chosen with
``--emit`` (:mod:`analysis.cluster.emit`), linked from the page. Also the plain-text pieces that
``--explain`` (:mod:`analysis.report.screen`) and ``record.md`` print (:func:`slo_text`,
:func:`recommendations_text`), so they read the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from analysis.advice.recommend import flag_text
from analysis.cluster.emit import (
    EMITTERS,
    LLMD_DIR,
    ClusterParams,
    html_section,
    write_cluster_files,
)
from analysis.diagnosis.failures import all_failed_warnings, small_stage_warnings
from analysis.model import Recommendations
from analysis.numeric import counted
from analysis.pipeline import Analysis
from analysis.report.html import HtmlReport, redact, render_html
from analysis.report.knee_json import to_json
from analysis.report.plots import latency_figure, png_bytes, throughput_figure, timeline_figure
from analysis.report.slo_plot import interactivity_figure
from analysis.report.table import format_csv, format_markdown, record_frame
from analysis.report.workload import workload_html, workload_sections
from analysis.slo.classes import analyze_classes
from analysis.slo.evaluate import SloResult
from analysis.stages.conversations import planned_turns, turn_lines
from analysis.stages.prefix_cache import hit_miss_line, report_note

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


def collect_warnings(analysis: Analysis) -> tuple[str, ...]:
    """What a reader must know before trusting the numbers: baseline, load notes, client-bound."""
    warnings = list(analysis.baseline.warnings) + list(analysis.run.notes)
    untrusted = [v.target_users for v in analysis.knee.stages if not v.trusted]
    if untrusted:
        warnings.append(
            "client-bound stages (the load generator was the limit, verdicts not trusted): "
            + ", ".join(counted(u, "user") for u in untrusted)
        )
    for name, frame in (
        ("gpu.csv", analysis.run.gpu),
        ("server metrics", analysis.run.server_metrics),
    ):
        if frame.empty:
            warnings.append(f"no {name} samples: the memory / KV-cache signals could not be used")
    warnings += small_stage_warnings(analysis.summary)
    warnings += all_failed_warnings(analysis.run.requests)
    if analysis.rate_knee is not None:
        warnings.append(
            "open-loop rate stages: each ran one dispatcher per process, so the concurrency "
            "verdicts and recommendations read 1 user; the rate columns and the rate knee are "
            "this run's answer"
        )
    late = _streams_stamped_when_read(analysis.run.run_info)
    if late:
        warnings.append(
            f"{late} of the streams were stamped when the client read them, not with the kernel's "
            "receive time (TLS, or no SO_TIMESTAMPNS here): on a busy load generator their TTFT "
            "and ITL include its own delay (~1-3 ms at 64 streams on 2 cores)"
        )
    return tuple(warnings)


def _streams_stamped_when_read(run_info: dict) -> str | None:
    """ "n of m" when some streams were stamped after the read (``prompt_source.stream_stamps``)."""
    source = run_info.get("prompt_source")
    stamps = source.get("stream_stamps") if isinstance(source, dict) else None
    if not isinstance(stamps, dict):
        return None
    counts = {k: v for k, v in stamps.items() if isinstance(v, int)}
    late = counts.get("readline", 0)
    return f"{late:,} of {sum(counts.values()):,}" if late else None


def slo_text(slo: SloResult) -> str:
    """The SLO answer beside the knee: limits used, capacity, what binds, goodput per stage."""
    lines = [f"SLO: {slo.limits}"]
    lines += [f"  preset {source}" for source in slo.sources]
    lines.append(slo.summary)
    for stage in slo.stages:
        good = "" if stage.good_pct is None else f", {stage.good_pct:.1f} % good"
        if stage.goodput_rps is not None:
            good += f", goodput {stage.goodput_rps:.3g} req/s"
        state = "met" if stage.met else "broken: " + "; ".join(stage.breaks)
        lines.append(f"  {counted(stage.target_users, 'user'):>10}: {state}{good}")
    return "\n".join(lines)


def value_text(value: object) -> str:
    """A recommended value for print: a 2-item list is a range ("16-19"), lists comma-joined."""
    if isinstance(value, list | tuple):
        return ("-" if len(value) == 2 else ", ").join(str(v) for v in value)
    return str(value)


def recommendations_text(recs: Recommendations) -> str:
    """Each setting with its reason; then each server flag on its own line with what it came
    from, so a pasted line carries its evidence; then what was withheld and why. A cut run's
    settings are marked provisional first."""
    lines = [
        f"  {item.key} = {value_text(item.value)}   # {item.reason}"
        for item in recs.items
        if item.key != "deploy_concurrency"  # printed first, on its own (the DEPLOY line)
    ]
    if recs.provisional:
        lines.insert(0, f"  PROVISIONAL: {recs.provisional}")
    flags = [item for item in recs.items if item.key.startswith("vllm.")]
    if flags:
        lines.append("  server flags (each from the evidence after #):")
        lines += [f"    {flag_text(item)}   # {item.reason}" for item in flags]
    lines += [f"  {note}" for note in recs.withheld]
    return "\n".join(lines) if lines else "  (none)"


def record_markdown(analysis: Analysis) -> str:
    record = record_frame(analysis.summary, analysis.knee, analysis.slo, analysis.rate_stages)
    slo = "" if analysis.slo is None else slo_text(analysis.slo).replace("\n", "  \n") + "\n\n"
    if analysis.rate_knee is not None:
        slo += analysis.rate_knee.text + "\n\n"
    cache = report_note(analysis.run.server_metrics, analysis.run.run_info)
    slo += f"{cache}\n\n" if cache else ""
    users = dict(zip(analysis.summary["stage"], analysis.summary["target_users"], strict=True))
    hits = hit_miss_line(analysis.run.requests, users)
    slo += f"{hits}\n\n" if hits else ""
    by_turn = turn_lines(analysis.run.requests, planned_turns(analysis.run.run_info))
    slo += "\n".join(by_turn) + "\n\n" if by_turn else ""
    classes = analyze_classes(analysis.run, analysis.knee)
    slo += classes.text.replace("\n", "  \n") + "\n\n" if classes else ""
    return (
        f"# Record table — {analysis.run_id}\n\n{analysis.knee.summary}\n\n{slo}"
        + format_markdown(record)
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
) -> dict[str, Path]:
    """Write all report files; returns file name → path. ``out_dir`` defaults to run/report.

    ``cluster``: which cluster files to write beside them (default: all of them)."""
    say = progress or (lambda _msg: None)
    out = Path(out_dir) if out_dir is not None else analysis.run.path / "report"
    out.mkdir(parents=True, exist_ok=True)
    record = record_frame(analysis.summary, analysis.knee, analysis.slo, analysis.rate_stages)
    workload = workload_sections(analysis)
    texts = {
        "record.csv": format_csv(record),
        "record.md": record_markdown(analysis),
        "knee.json": to_json(
            analysis.summary,
            analysis.knee,
            analysis.baseline,
            analysis.recommendations,
            run_id=analysis.run_id,
            slo=analysis.slo,
            rate_stages=analysis.rate_stages,
            rate_knee=analysis.rate_knee,
            workload=workload,
            standing=analysis.standing,
        ),
        "recommendations.yaml": analysis.recommendations_yaml,
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = out / name
        paths[name].write_text(text, encoding="utf-8")
    say("drawing plots")
    figures = {
        "latency.png": ("Latency vs concurrency", latency_figure(analysis.summary, analysis.knee)),
        "throughput.png": (
            "Throughput vs concurrency",
            throughput_figure(analysis.summary, analysis.knee),
        ),
        "timeline.png": (
            "Timeline",
            timeline_figure(
                stages=analysis.run.stages,
                requests=analysis.run.requests,
                gpu=analysis.run.gpu,
                server=analysis.server_timeline,
            ),
        ),
        "interactivity.png": (
            "Interactivity vs throughput",
            interactivity_figure(analysis.summary, analysis.slo),
        ),
    }
    images = {}
    for name, (title, fig) in figures.items():
        images[title] = png_bytes(fig)
        paths[name] = out / name
        paths[name].write_bytes(images[title])
    say("writing the cluster files")
    if analysis.standing.cannot_tell:  # no answer: no cluster file, not even an earlier one
        cluster = ClusterParams(emit=())
        drop_cluster_files(out)
    cluster_paths = write_cluster_files(analysis, out, cluster or ClusterParams())
    paths.update(cluster_paths)
    page = HtmlReport(
        run_id=analysis.run_id,
        record=record,
        knee=analysis.knee,
        baseline=analysis.baseline,
        recommendations=analysis.recommendations,
        recommendations_yaml=analysis.recommendations_yaml,
        run_info=redact(analysis.run.run_info),
        images=images,
        warnings=collect_warnings(analysis),
        slo=analysis.slo,
        cluster_html=html_section(analysis, cluster_paths),
        workload_html=workload_html(workload),
    )
    paths["report.html"] = out / "report.html"
    paths["report.html"].write_text(render_html(page), encoding="utf-8")
    return paths
