"""A KEDA ``ScaledObject`` and an ``autoscaling/v2`` HPA whose thresholds come from the knee.

The thresholds are the server's own gauges at two measured stages (:mod:`.stages`): the stage
at the production watermark (the load one replica should carry) and the knee's stage (the load
it must never reach). Each trigger scales on a per-replica average (KEDA's ``AverageValue``, the
HPA's ``AverageValue`` target), so the target is what one replica showed at the watermark:

* **waiting requests** — midway between the watermark's and the knee's mean queue (at the
  watermark a healthy server queues ~0, so the watermark's own value would scale on any
  request that waits); left out when the knee did not queue more than the watermark;
* **running requests** — the watermark stage's mean running batch;
* **KV-cache use** — the watermark stage's mean (as the engine's 0–1 ratio); left out for
  engines that export none (TGI, llama.cpp) or when it read 0.

Without server metrics the one trigger is the client-side figure the knee was measured in —
concurrent requests per replica, the watermark's high end — and the comment says that the
gateway must export it (the metric name is a placeholder to replace).

Every trigger carries its evidence in a comment ("at the watermark, 5 users, the server queued
0.0 on average; at the knee, 9 users, 1.0"). Cluster-specific names (the Deployment, the
Prometheus address) are parameters with placeholder defaults, and the header says to set them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from analysis.cluster.engines import Engine, detect_engine, served_model
from analysis.cluster.plan import ScaleParams
from analysis.cluster.stages import Anchors, StageGauges, anchors
from analysis.cluster.yamlblock import Commented, dump
from analysis.pipeline import Analysis
from analysis.report.answer_view import answer_note
from analysis.report.stage_words import provisional_text
from loadknee_core.numeric import counted

#: the placeholder metric a gateway must export when the server exports none
GATEWAY_METRIC = "gateway_requests_in_flight"


@dataclass(frozen=True)
class Trigger:
    """One scaling rule: a PromQL query, its per-replica target, and why that target."""

    name: str  # short id: waiting | running | kv_cache | gateway
    metric: str  # the engine's (or the gateway's) metric name
    query: str
    target: float
    evidence: str


def _num(value: float) -> str:
    """A threshold as text: at most three decimals, no trailing zeros (0.5, 3, 0.425)."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def quantity(value: float) -> str:
    """A Kubernetes quantity: whole numbers plain ("3"), others in milli-units ("425m")."""
    milli = max(1, round(value * 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _known(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _at(gauge: StageGauges | None, field: str, word: str, unit: str = "") -> str:
    if gauge is None:
        return f"at the {word}: not measured"
    value = getattr(gauge, field)
    shown = f"{value:.1f}{unit}" if _known(value) else "not measured"
    return f"at the {word}, {counted(gauge.users, 'user')}, {shown}"


def _selector(engine: Engine, model: str | None) -> str:
    return f'{{{engine.model_label}="{model}"}}' if engine.model_label and model else ""


def triggers(
    analysis: Analysis, marks: Anchors | None = None
) -> tuple[Engine | None, list[Trigger]]:
    """The engine measured and its triggers (one client-side trigger without server metrics)."""
    marks = marks or anchors(analysis)
    engine = detect_engine(analysis.run.server_metrics)
    wm, knee = marks.watermark, marks.knee
    kind = marks.knee_kind or "knee"
    if engine is None or wm is None or not _known(wm.running_mean):
        users = marks.watermark_range[1] if marks.watermark_range else (wm.users if wm else None)
        if users is None:
            return engine, []
        return engine, [
            Trigger(
                "gateway",
                GATEWAY_METRIC,
                f"sum({GATEWAY_METRIC})",
                float(users),
                "no server metrics were scraped: the threshold is the client-side concurrency "
                f"the knee was measured in, {counted(users, 'concurrent request')} per replica "
                "at the watermark's high end; the gateway (or a sidecar) must export its "
                f"in-flight requests as {GATEWAY_METRIC}, a placeholder name to replace",
            )
        ]
    model = served_model(analysis.run.server_metrics, engine)
    sel = _selector(engine, model)
    out: list[Trigger] = []
    if knee is not None and _known(knee.waiting_mean) and knee.waiting_mean > wm.waiting_mean:
        target = (wm.waiting_mean + knee.waiting_mean) / 2
        out.append(
            Trigger(
                "waiting",
                engine.waiting,
                f"sum({engine.waiting}{sel})",
                target,
                f"{_at(wm, 'waiting_mean', 'watermark')} requests waited on average; "
                f"{_at(knee, 'waiting_mean', kind)}: the target is midway, "
                f"{_num(target)} waiting per replica",
            )
        )
    if wm.running_mean > 0:
        out.append(
            Trigger(
                "running",
                engine.running,
                f"sum({engine.running}{sel})",
                wm.running_mean,
                f"{_at(wm, 'running_mean', 'watermark')} requests ran on average "
                f"({_at(knee, 'running_mean', kind)}): the target is the watermark's, "
                f"{_num(wm.running_mean)} running per replica",
            )
        )
    if engine.kv_usage and _known(wm.kv_mean_pct) and wm.kv_mean_pct > 0:
        ratio = wm.kv_mean_pct / 100
        out.append(
            Trigger(
                "kv_cache",
                engine.kv_usage,
                f"sum({engine.kv_usage}{sel})",
                ratio,
                f"{_at(wm, 'kv_mean_pct', 'watermark', ' %')} KV cache in use on average "
                f"({_at(knee, 'kv_mean_pct', kind, ' %')}): the target is the watermark's, "
                f"{_num(ratio)} of the cache per replica",
            )
        )
    return engine, out


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return name or "llm-server"


def _names(analysis: Analysis, engine: Engine | None, params: ScaleParams) -> tuple[str, int]:
    model = served_model(analysis.run.server_metrics, engine) if engine else None
    deployment = params.deployment or _dns_name(
        model or str(analysis.run.run_info.get("model") or "llm-server")
    )
    replicas = analysis.recommendations.get("replicas")
    most = params.max_replicas or (int(replicas) if isinstance(replicas, int) else 4)
    return deployment, max(most, params.min_replicas)


def _header(analysis: Analysis, engine: Engine | None, marks: Anchors, what: str) -> list[str]:
    lines = [
        f"loadknee {what} for run {analysis.run_id}, from its measured stages.",
        "Set the Deployment name, namespace and Prometheus address for your cluster; the "
        "thresholds come from the run (each trigger says from where).",
        answer_note(marks.view),
    ]
    if engine is not None:
        lines.append(f"Engine: {engine.label} (metric names as it exports them).")
    if marks.watermark_basis != "production_watermark":
        lines.append(f"Watermark: {marks.watermark_basis}.")
    if marks.knee is None:
        lines.append(
            "No knee or red line within the tested range: the knee-side evidence is missing; "
            "sweep higher before trusting these thresholds."
        )
    if analysis.recommendations.provisional:
        lines.append("PROVISIONAL: " + provisional_text(analysis.recommendations.provisional))
    return lines


def scaled_object(analysis: Analysis, params: ScaleParams | None = None) -> str:
    """The KEDA ScaledObject (keda.sh/v1alpha1), one Prometheus trigger per metric, as YAML."""
    p = params or ScaleParams()
    marks = anchors(analysis)
    engine, found = triggers(analysis, marks)
    deployment, most = _names(analysis, engine, p)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "pollingInterval": p.polling_s,
        "cooldownPeriod": p.cooldown_s,
        "minReplicaCount": p.min_replicas,
        "maxReplicaCount": most,
        "triggers": [
            Commented(
                {
                    "type": "prometheus",
                    "name": t.name.replace("_", "-"),
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": p.prometheus_url,
                        "query": t.query,
                        "threshold": _num(t.target),
                    },
                },
                (t.evidence,),
            )
            for t in found
        ],
    }
    doc = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": deployment, "namespace": p.namespace},
        "spec": spec,
    }
    return dump(doc, header=_header(analysis, engine, marks, "KEDA ScaledObject"))


def hpa(analysis: Analysis, params: ScaleParams | None = None) -> str:
    """The autoscaling/v2 HorizontalPodAutoscaler on the same metrics (External), as YAML.

    The metrics reach the HPA through an external-metrics adapter (prometheus-adapter, or
    KEDA's own): the names are the engine's, selected by the served model where it labels one.
    """
    p = params or ScaleParams()
    marks = anchors(analysis)
    engine, found = triggers(analysis, marks)
    deployment, most = _names(analysis, engine, p)
    model = served_model(analysis.run.server_metrics, engine) if engine else None
    metrics = []
    for t in found:
        metric: dict[str, Any] = {"name": t.metric}
        if engine and engine.model_label and model and t.name != "gateway":
            metric["selector"] = {"matchLabels": {engine.model_label: model}}
        metrics.append(
            Commented(
                {
                    "type": "External",
                    "external": {
                        "metric": metric,
                        "target": {"type": "AverageValue", "averageValue": quantity(t.target)},
                    },
                },
                (t.evidence,),
            )
        )
    doc = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": deployment, "namespace": p.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicas": p.min_replicas,
            "maxReplicas": most,
            "metrics": metrics,
        },
    }
    header = _header(analysis, engine, marks, "autoscaling/v2 HPA")
    header.append(
        "The External metrics need an adapter that serves them from Prometheus "
        "(prometheus-adapter, or KEDA's metrics server)."
    )
    return dump(doc, header=header)
