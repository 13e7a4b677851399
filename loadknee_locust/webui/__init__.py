"""The Locust web UI's "Knee" tab: live verdicts, charts and telemetry beside Locust's own.

- :mod:`.tab` — the tab and its CSV download;
- :mod:`.livepage` — the routes on Locust's web server: live page, run files, form script;
- :mod:`.liveview` — the live sweep view (status, charts, verdicts) as an HTML fragment;
- :mod:`.livetail` — the telemetry CSVs followed as they grow (KV cache, queue, GPU memory);
- :mod:`.svgchart` — small line charts as inline SVG, in pure Python;
- :mod:`.formcheck` — check the start form's ``--llm-*`` values before Locust applies them.
"""
