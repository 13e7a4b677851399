"""Which cluster files a report gets, and their names: known before any of them is rendered.

``--emit`` names (:data:`NAMES`): ``keda`` → ``keda-scaledobject.yaml``, ``hpa`` →
``hpa.yaml``, ``alerts`` → ``alerts.rules.yaml``, ``profile`` → ``latency-profile.yaml``,
``energy`` → ``energy.yaml``, ``llmd`` → ``llm-d/`` (one ``stage_<n>_benchmark_report_v0_2.yaml``
per stage); :class:`ClusterParams` (the flags), :func:`planned_files` (the names a run gets).

Its own module, apart from the renderers (:mod:`analysis.cluster.emit`), because ``loadknee
analyze`` needs these names for its answer ("report: …", ``--explain``'s file list) and the
flags for its parser, while the renderers and what they import are needed only once the answer
is printed and the files are written.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from analysis.pipeline import Analysis

LLMD: Final = "llmd"  # the one --emit name that writes a folder
LLMD_DIR: Final = "llm-d"
#: --emit name → the file it writes (the llm-d reports: :func:`report_name` under LLMD_DIR)
FILES: Final[dict[str, str]] = {
    "keda": "keda-scaledobject.yaml",
    "hpa": "hpa.yaml",
    "alerts": "alerts.rules.yaml",
    "profile": "latency-profile.yaml",
    "energy": "energy.yaml",
}
NAMES: Final[tuple[str, ...]] = (*FILES, LLMD)
#: what ``--emit all`` adds to the report folder (the llm-d reports in one folder)
CLUSTER_ENTRIES: Final[tuple[str, ...]] = (*FILES.values(), LLMD_DIR)


@dataclass(frozen=True)
class ScaleParams:
    """Names of the cluster the files are written for (placeholders by default)."""

    deployment: str = ""  # default: the served model's name, DNS-safe
    namespace: str = "default"
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    min_replicas: int = 1
    max_replicas: int | None = None  # default: the recommended replicas, else 4
    polling_s: int = 15
    cooldown_s: int = 300


@dataclass(frozen=True)
class AlertParams:
    """How the rules average and wait (Prometheus durations)."""

    window: str = "1m"  # averaging window of the gauges and of the latency rate
    hold: str = "2m"  # the rules' ``for:``
    quantile: float = 0.95


@dataclass(frozen=True)
class ClusterParams:
    """Which files to write, and the cluster names the manifests carry."""

    emit: tuple[str, ...] = NAMES
    scale: ScaleParams = field(default_factory=ScaleParams)
    alerts: AlertParams = field(default_factory=AlertParams)

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
            default=ScaleParams().prometheus_url,
            metavar="URL",
            help="the Prometheus that KEDA queries (default %(default)s)",
        )

    @staticmethod
    def from_cli_args(ns: argparse.Namespace) -> ClusterParams:
        return ClusterParams(
            emit=parse_emit(ns.emit),
            scale=ScaleParams(
                deployment=ns.k8s_deployment,
                namespace=ns.k8s_namespace,
                prometheus_url=ns.prometheus_url,
            ),
        )


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


def report_name(stage: int) -> str:
    """The llm-d report file of one stage (inference-perf's naming)."""
    return f"stage_{stage}_benchmark_report_v0_2.yaml"


def report_stages(analysis: Analysis) -> list[int]:
    """The stages the llm-d export writes a report of: every one, baseline included."""
    return sorted(int(s) for s in analysis.summary["stage"])


def planned_files(analysis: Analysis, params: ClusterParams) -> list[str]:
    """The names :func:`~analysis.cluster.emit.write_cluster_files` writes (relative to the
    folder), before it runs."""
    names: list[str] = []
    for name in params.emit:
        if name == LLMD:
            names += [f"{LLMD_DIR}/{report_name(s)}" for s in report_stages(analysis)]
        else:
            names.append(FILES[name])
    return names


def listed(names: Iterable[str]) -> list[str]:
    """The report files for the terminal's file line: the llm-d reports as one folder entry."""
    names = sorted(names)
    reports = [n for n in names if n.startswith(LLMD_DIR + "/")]
    out = [n for n in names if not n.startswith(LLMD_DIR + "/")]
    if reports:
        out.append(f"{LLMD_DIR}/ ({len(reports)} stage reports)")
    return out
