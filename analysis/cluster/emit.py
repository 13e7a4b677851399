"""Write the cluster files of one analysed run into its report folder, and the page's section.

``--emit`` names (:data:`EMITTERS`, default all): ``keda`` → ``keda-scaledobject.yaml``,
``hpa`` → ``hpa.yaml``, ``alerts`` → ``alerts.rules.yaml``, ``profile`` →
``latency-profile.yaml``, ``energy`` → ``energy.yaml``, ``llmd`` → ``llm-d/`` (one
``stage_<n>_benchmark_report_v0_2.yaml`` per stage). :func:`html_section` is what
``report.html`` shows of them: a link to each file and the energy table.
"""

from __future__ import annotations

import argparse
import html
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from analysis.cluster import alerts, autoscale, energy, llmd, profile
from analysis.cluster.stages import records
from analysis.pipeline import Analysis

LLMD_DIR: Final = "llm-d"


@dataclass(frozen=True)
class Emitter:
    file: str
    title: str
    render: Callable[[Analysis, ClusterParams], str]


@dataclass(frozen=True)
class ClusterParams:
    """Which files to write, and the cluster names the manifests carry."""

    emit: tuple[str, ...] = ("keda", "hpa", "alerts", "profile", "energy", "llmd")
    scale: autoscale.ScaleParams = field(default_factory=autoscale.ScaleParams)
    alerts: alerts.AlertParams = field(default_factory=alerts.AlertParams)

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        g = parser.add_argument_group("cluster files (report/)")
        g.add_argument(
            "--emit",
            default="all",
            metavar="LIST",
            help="cluster files to write into the report folder, comma-separated from "
            f"{','.join(NAMES)}; 'all' (default) or 'none'",
        )
        g.add_argument(
            "--k8s-deployment",
            default="",
            metavar="NAME",
            help="Deployment the KEDA/HPA files scale (default: the served model's name)",
        )
        g.add_argument("--k8s-namespace", default="default", metavar="NS", help="their namespace")
        g.add_argument(
            "--prometheus-url",
            default=autoscale.ScaleParams().prometheus_url,
            metavar="URL",
            help="the Prometheus that KEDA queries (default %(default)s)",
        )

    @staticmethod
    def from_cli_args(ns: argparse.Namespace) -> ClusterParams:
        return ClusterParams(
            emit=parse_emit(ns.emit),
            scale=autoscale.ScaleParams(
                deployment=ns.k8s_deployment,
                namespace=ns.k8s_namespace,
                prometheus_url=ns.prometheus_url,
            ),
        )


EMITTERS: Final[dict[str, Emitter]] = {
    "keda": Emitter(
        "keda-scaledobject.yaml",
        "KEDA ScaledObject",
        lambda a, p: autoscale.scaled_object(a, p.scale),
    ),
    "hpa": Emitter(
        "hpa.yaml", "Kubernetes HPA (autoscaling/v2)", lambda a, p: autoscale.hpa(a, p.scale)
    ),
    "alerts": Emitter(
        "alerts.rules.yaml",
        "Prometheus alerting rules",
        lambda a, p: alerts.rules_yaml(a, p.alerts),
    ),
    "profile": Emitter(
        "latency-profile.yaml",
        "Latency profile (ITL = α + β × batch)",
        lambda a, p: profile.profile_yaml(a),
    ),
    "energy": Emitter("energy.yaml", "Energy per stage", lambda a, p: energy.energy_yaml(a)),
}
#: the one name that writes a folder
LLMD = "llmd"
NAMES: Final[tuple[str, ...]] = (*EMITTERS, LLMD)


def parse_emit(text: str) -> tuple[str, ...]:
    """``keda,hpa`` → ("keda", "hpa"); ``all`` / ``none``; unknown names raise ValueError."""
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words in (["all"], []):
        return NAMES if words else ()
    if words == ["none"]:
        return ()
    unknown = [w for w in words if w not in NAMES]
    if unknown:
        raise ValueError(f"--emit: unknown {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    return tuple(dict.fromkeys(words))


def planned_files(analysis: Analysis, params: ClusterParams) -> list[str]:
    """The names :func:`write_cluster_files` writes (relative to the folder), before it runs."""
    names: list[str] = []
    for name in params.emit:
        if name == LLMD:
            names += [f"{LLMD_DIR}/{llmd.report_name(s)}" for s in llmd.report_stages(analysis)]
        else:
            names.append(EMITTERS[name].file)
    return names


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
    """The page's "From the knee to your cluster" section: links, then the energy table."""
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
    parts = ["<h2>From the knee to your cluster</h2>", f"<ul>{''.join(items)}</ul>"]
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
                else f"<p>At the knee ({analysis.knee.knee_users} users): "
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


def listed(names: Iterable[str]) -> list[str]:
    """The report files for the terminal's file line: the llm-d reports as one folder entry."""
    names = sorted(names)
    reports = [n for n in names if n.startswith(LLMD_DIR + "/")]
    out = [n for n in names if not n.startswith(LLMD_DIR + "/")]
    if reports:
        out.append(f"{LLMD_DIR}/ ({len(reports)} stage reports)")
    return out


#: what ``--emit all`` adds to the report folder (the llm-d reports in one folder)
CLUSTER_ENTRIES: Final[tuple[str, ...]] = (*(e.file for e in EMITTERS.values()), LLMD_DIR)
