"""Write the cluster files of one analysed run into its report folder, and the page's section.

``--emit`` names (:data:`EMITTERS`, default all): ``keda`` → ``keda-scaledobject.yaml``,
``hpa`` → ``hpa.yaml``, ``alerts`` → ``alerts.rules.yaml``, ``profile`` →
``latency-profile.yaml``, ``energy`` → ``energy.yaml``, ``llmd`` → ``llm-d/`` (one
``stage_<n>_benchmark_report_v0_2.yaml`` per stage). :func:`html_section` is what
``report.html`` shows of them: a link to each file and the energy table. The names and the
``--emit`` flags are in :mod:`analysis.cluster.plan`, which the answer needs before these
renderers.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from analysis.cluster import alerts, autoscale, energy, llmd, profile
from analysis.cluster.plan import (  # noqa: F401 (the names' old import path)
    CLUSTER_ENTRIES,
    FILES,
    LLMD,
    LLMD_DIR,
    NAMES,
    ClusterParams,
    listed,
    parse_emit,
    planned_files,
)
from analysis.cluster.stages import answer, records
from analysis.pipeline import Analysis
from analysis.report.answer_view import knee_stage_words


@dataclass(frozen=True)
class Emitter:
    file: str
    title: str
    render: Callable[[Analysis, ClusterParams], str]


EMITTERS: Final[dict[str, Emitter]] = {
    "keda": Emitter(
        FILES["keda"], "KEDA ScaledObject", lambda a, p: autoscale.scaled_object(a, p.scale)
    ),
    "hpa": Emitter(
        FILES["hpa"], "Kubernetes HPA (autoscaling/v2)", lambda a, p: autoscale.hpa(a, p.scale)
    ),
    "alerts": Emitter(
        FILES["alerts"],
        "Prometheus alerting rules",
        lambda a, p: alerts.rules_yaml(a, p.alerts),
    ),
    "profile": Emitter(
        FILES["profile"],
        "Latency profile (ITL = α + β × batch)",
        lambda a, p: profile.profile_yaml(a),
    ),
    "energy": Emitter(FILES["energy"], "Energy per stage", lambda a, p: energy.energy_yaml(a)),
}


def write_cluster_files(analysis: Analysis, out: Path, params: ClusterParams) -> dict[str, Path]:
    """Write the chosen files under ``out``; returns name (relative to ``out``) → path."""
    paths: dict[str, Path] = {}
    out.mkdir(parents=True, exist_ok=True)
    for name in params.emit:
        if name == LLMD:
            folder = out / LLMD_DIR
            folder.mkdir(parents=True, exist_ok=True)
            for file, text in llmd.export_reports(analysis).items():
                paths[f"{LLMD_DIR}/{file}"] = folder / file
                (folder / file).write_text(text, encoding="utf-8")
            continue
        emitter = EMITTERS[name]
        paths[emitter.file] = out / emitter.file
        paths[emitter.file].write_text(emitter.render(analysis, params), encoding="utf-8")
    return paths


def _fmt(value: float, digits: int) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def html_section(analysis: Analysis, files: Iterable[str]) -> str:
    """The body of the page's "From the knee to your cluster" section: links, then the energy
    table (the page writes its heading)."""
    files = list(files)
    if not files:
        return ""
    titles = {e.file: e.title for e in EMITTERS.values()}
    items = [
        f'<li><a href="{html.escape(f)}">{html.escape(f)}</a> — {html.escape(titles[f])}</li>'
        for f in files
        if f in titles
    ]
    reports = [f for f in files if f.startswith(LLMD_DIR + "/")]
    if reports:
        items.append(
            f'<li><a href="{html.escape(reports[0])}">{html.escape(LLMD_DIR)}/</a> — llm-d '
            f"benchmark report v0.2, one per stage ({len(reports)} files)</li>"
        )
    parts = [f"<ul>{''.join(items)}</ul>"]
    if "energy.yaml" in files:
        e = energy.energy(analysis)
        if e.source:
            rows = "".join(
                f"<tr><td>{int(r.users)}</td><td>{_fmt(r.power_mean_w, 1)}</td>"
                f"<td>{_fmt(r.output_tok_s, 1)}</td><td>{_fmt(r.output_tokens_per_j, 3)}</td></tr>"
                for r in records(e.stages)
            )
            per_kw = (
                ""
                if e.knee_users_per_kw is None
                else f"<p>At {html.escape(knee_stage_words(answer(analysis)))}: "
                f"{e.knee_users_per_kw:.1f} users per kW.</p>"
            )
            parts.append(
                f"<h3>Energy (power from {html.escape(e.source)})</h3><table><tr><th>users</th>"
                "<th>mean W</th><th>out tok/s</th><th>out tokens / J</th></tr>"
                f"{rows}</table>{per_kw}"
            )
        else:
            parts.append(f"<p>Energy: {html.escape(e.why)}.</p>")
    return "\n".join(parts)
