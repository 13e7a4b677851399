"""The live judgement of a run still being written, for the adaptive sweep and the web UI.

- :mod:`.answer` — the knee and each finished stage's verdict so far, as the JSON object both
  Locust-side callers read (``python -m analysis.live.answer RUN_DIR``), worded by the report
  layer;
- :mod:`.judge` — a long-lived child (``python -m analysis.live.judge``) answering one request a
  line, so pandas is imported once per sweep.

Why apart from :mod:`analysis.knee`: the judgement returns facts and never words; these entry
points print the answer, so they word it, as the report does.
"""
