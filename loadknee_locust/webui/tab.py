"""A live "Knee" tab in Locust's web UI: one row per stage, plus a CSV download of those rows.

Uses Locust 2.47's web UI extension points: ``extended_tabs`` / ``extended_tables`` in
``template_args``, and an ``after_request`` hook that adds ``extended_stats`` to the JSON of
``/stats/requests`` (the page polls it every ~2 s). The numbers come from the recorder's running
:class:`~loadknee_locust.record.recorder.StageStats` (stdlib only, no pandas in the Locust process):
stage, kind, users, requests (all phases), measured, errors, e2e P50/P95, TTFT P50/P95 (measured,
successful rows; the latest 20 000 per stage), output tokens/s (measured window), and where the
server reports ``cached_tokens`` in its usage the prefix-cache hit % (cached over prompt tokens)
and the TTFT P50 of hits and of misses (blank otherwise; the report's hit rate is the server's
counter delta). These are live numbers for watching; the analysis recomputes everything exactly
from ``requests.csv``.

Above the table, a script served with the page (``/loadknee/ui.js``, injected into Locust's own
``index.html``; no CDN) shows the live view of :mod:`~loadknee_locust.webui.liveview` (status,
banners, SVG charts, provisional verdicts, and at the end the run's files and ``report.html``,
served under ``/loadknee/files/``) and fits the start form to the shape: short labels grouped by
section, the help as a tooltip, a note on the users fields. ``/loadknee/live`` is the same view
as a page of its own. ``/swarm`` is checked first (:mod:`~loadknee_locust.webui.formcheck`).
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from loadknee_locust.record.recorder import RunLog, percentile

if TYPE_CHECKING:
    from loadknee_locust.webui.livepage import PluginState

TAB_KEY = "knee"
CSV_PATH = "/loadknee/stages.csv"
#: (key, title) of each column, in order; keys are also the CSV header
COLUMNS: tuple[tuple[str, str], ...] = (
    ("stage", "Stage"),
    ("kind", "Kind"),
    ("phase", "Phase"),
    ("users", "Users"),
    ("requests", "Requests"),
    ("measured", "Measured"),
    ("errors", "Errors"),
    ("e2e_p50_ms", "E2E P50 (ms)"),
    ("e2e_p95_ms", "E2E P95 (ms)"),
    ("ttft_p50_ms", "TTFT P50 (ms)"),
    ("ttft_p95_ms", "TTFT P95 (ms)"),
    ("output_tokens_per_s", "Output tok/s"),
    ("cache_hit_pct", "Cache hit %"),
    ("hit_ttft_p50_ms", "TTFT P50 hits (ms)"),
    ("miss_ttft_p50_ms", "TTFT P50 misses (ms)"),
)


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def stage_rows(run: RunLog | None) -> list[dict[str, Any]]:
    """One dict per stage seen so far (planned stages not yet reached are left out)."""
    if run is None or run.schedule is None:
        return []
    sched = run.schedule
    now_pos = sched.position()
    closed = {rec.stage for rec in sched.closed}
    rows = []
    for plan in sched.stages:
        if plan.index not in closed and (now_pos.finished or plan.index != now_pos.stage):
            continue
        stats = run.stage_stats(plan.index)
        rows.append(
            {
                "stage": plan.index,
                "kind": plan.kind,
                "phase": "done" if plan.index in closed else now_pos.phase,
                "users": plan.users,
                "requests": stats.requests,
                "measured": stats.measured,
                "errors": stats.errors,
                "e2e_p50_ms": _round(percentile(stats.e2e_ms, 50.0)),
                "e2e_p95_ms": _round(percentile(stats.e2e_ms, 95.0)),
                "ttft_p50_ms": _round(percentile(stats.ttft_ms, 50.0)),
                "ttft_p95_ms": _round(percentile(stats.ttft_ms, 95.0)),
                "output_tokens_per_s": _round(stats.output_tokens_per_s(plan.users)),
                "cache_hit_pct": _round(stats.cache_hit_pct()),
                "hit_ttft_p50_ms": _round(percentile(stats.hit_ttft_ms, 50.0)),
                "miss_ttft_p50_ms": _round(percentile(stats.miss_ttft_ms, 50.0)),
            }
        )
    return rows


def rows_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[key for key, _ in COLUMNS], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def install(web_ui: Any, lk: PluginState) -> None:
    """Add the tab, the table, the CSV link and their two hooks to Locust's web UI."""
    from flask import Response, request

    from loadknee_locust.webui import livepage

    livepage.install(web_ui, lk)

    web_ui.template_args["extended_tabs"] = [{"title": "Knee", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in COLUMNS]}
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "." + CSV_PATH, "title": "Download per-stage (Knee tab) CSV"}
    ]

    @web_ui.app.after_request
    def add_knee_rows(response: Any) -> Any:
        if request.path == "/stats/requests" and response.is_json:
            data = response.get_json()
            extended = [e for e in data.get("extended_stats") or [] if e.get("key") != TAB_KEY]
            extended.append({"key": TAB_KEY, "data": stage_rows(lk.run)})
            data["extended_stats"] = extended
            response.set_data(json.dumps(data))
        return response

    @web_ui.app.route(CSV_PATH)
    @web_ui.auth_required_if_enabled
    def knee_csv() -> Any:
        return Response(
            rows_csv(stage_rows(lk.run)),
            mimetype="text/csv",
            headers={"Content-Disposition": "attachment; filename=loadknee_stages.csv"},
        )
