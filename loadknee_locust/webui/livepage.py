"""Serve the live view, the run's files and the form helper script from Locust's own web server.

Routes (all behind ``auth_required_if_enabled``): ``/loadknee/live`` (a page of its own),
``/loadknee/live/fragment`` (what the Knee tab and that page poll every 2 s),
``/loadknee/files/<name>`` (the current run directory, read-only: ``report/report.html`` too),
``/loadknee/ui.js`` (injected into Locust's ``index.html``: the live view above the Knee table and
the start form's labels). A ``before_request`` hook checks ``/swarm``'s ``--llm-*`` fields, and
``test_stop`` starts ``loadknee analyze`` in a child process once the last rows have landed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import gevent

from loadknee_locust.plugin.options import FORM_GROUP_TITLES, llm_options, option_specs
from loadknee_locust.sweep.childjobs import FinalReport, ProvisionalVerdicts
from loadknee_locust.webui.formcheck import check_form
from loadknee_locust.webui.liveview import FILES_PREFIX, LiveView
from loadknee_locust.webui.openloop import is_open_loop, open_loop_plan

if TYPE_CHECKING:
    from loadknee_locust.record.recorder import RunLog


class PluginState(Protocol):
    """What the web UI reads of the plugin's state (``plugin/wiring``'s ``Loadknee``), named
    here so that the web UI, which the plugin installs, imports nothing of the plugin back."""

    environment: Any
    role: str
    run: RunLog | None

    def join_stop(self) -> None: ...


REPORT_DELAY_S = 4.0  # > Locust's worker report interval: the last worker rows land first
WORKER_REPORT_WAIT_S = 3.5  # the same, before a plain grid's stage is judged on the master
SCRIPT = Path(__file__).with_name("live.js")
PAGE = """<!doctype html><html><head><meta charset="utf-8"><base href="../">
<title>loadknee live</title>
<style>body{font-family:sans-serif;margin:1em;background:#fff;color:#222}
html.lk-dark body{background:#121212;color:#ddd}</style>
<script>/* Locust's theme toggle keeps its choice in localStorage.theme; else the system's */
var t=localStorage.theme;if(t==="dark"||(!t&&matchMedia("(prefers-color-scheme: dark)").matches))
document.documentElement.classList.add("lk-dark");</script></head>
<body><h2>loadknee: live sweep</h2><div id="lk-live">loading…</div>
<script src="./loadknee/ui.js"></script></body></html>"""


def form_fields(open_loop: bool = False) -> dict[str, Any]:
    """What the script needs to relabel the start form: label, help, group of each option, and
    whether the load is open loop (the note under the users fields names what drives it)."""
    return {
        "open_loop": open_loop,
        "groups": FORM_GROUP_TITLES,
        "fields": {
            s.dest: {
                "label": s.label,
                "help": s.help_text(),
                "group": s.group,
                "input": _camel(s.dest),
            }
            for s in option_specs()
        },
    }


def _camel(dest: str) -> str:
    """The name Locust's React form gives a custom field's input (``llm_red_line_p95_ms`` →
    ``llmRedLineP95Ms``)."""
    head, *rest = dest.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def install(web_ui: Any, lk: PluginState) -> None:
    from flask import Response, abort, jsonify, request, send_from_directory

    view = LiveView()
    verdicts = ProvisionalVerdicts()
    report = FinalReport()
    app = web_ui.app
    script = SCRIPT.read_text(encoding="utf-8").replace(
        "__LK_FORM__",
        json.dumps(form_fields(is_open_loop(getattr(lk.environment, "shape_class", None)))),
    )

    def on_test_stop(**_: Any) -> None:
        run = lk.run
        if run is not None:
            gevent.spawn_later(REPORT_DELAY_S, _finish, run.run_dir)

    def _finish(run_dir: Path) -> None:
        run = lk.run
        if run is None or run.run_dir != run_dir:
            return
        lk.join_stop()  # the telemetry's files closed, run.json's end written
        run.flush()
        report.start(run_dir)

    lk.environment.events.test_stop.add_listener(on_test_stop)

    @app.route("/loadknee/live")
    @web_ui.auth_required_if_enabled
    def live_page() -> Any:
        return Response(PAGE, mimetype="text/html")

    @app.route("/loadknee/live/fragment")
    @web_ui.auth_required_if_enabled
    def live_fragment() -> Any:
        run, runner, now = lk.run, lk.environment.runner, time.time()
        verdict = None
        if run is not None:
            settle_s = WORKER_REPORT_WAIT_S if lk.role == "master" else 0.0
            verdict = verdicts.latest(run, now=now, settle_s=settle_s)
        plan = open_loop_plan(lk.environment)
        body = view.fragment(run, runner, verdict, report, now=now, open_plan=plan)
        return Response(body, mimetype="text/html", headers={"Cache-Control": "no-store"})

    @app.route(FILES_PREFIX + "<path:name>")
    @web_ui.auth_required_if_enabled
    def run_file(name: str) -> Any:
        run = lk.run
        if run is None:
            abort(404)
        return send_from_directory(run.run_dir.resolve(), name)  # refuses paths outside it

    @app.route("/loadknee/ui.js")
    @web_ui.auth_required_if_enabled
    def ui_script() -> Any:
        return Response(script, mimetype="text/javascript")

    @app.before_request
    def check_swarm() -> Any:
        if request.path != "/swarm" or request.method != "POST":
            return None
        open_loop = is_open_loop(getattr(lk.environment, "shape_class", None))
        message = check_form(request.form, llm_options(lk.environment), open_loop=open_loop)
        if message is None:
            return None
        return jsonify({"success": False, "message": message, "host": lk.environment.host})

    @app.after_request
    def inject_script(response: Any) -> Any:
        if request.path == "/" and response.mimetype == "text/html" and response.status_code == 200:
            response.direct_passthrough = False
            page = response.get_data(as_text=True)
            tag = '<script src="./loadknee/ui.js"></script>'
            if tag not in page:
                response.set_data(page.replace("</body>", tag + "</body>", 1))
        return response
