"""The settings to deploy.

- :mod:`.recommend` — max concurrency, timeouts, engine flags, watermark, replicas, each with its
  reason;
- :mod:`.deploy` — the one concurrency to configure and the limit that bound it;
- :mod:`.engine` — which engine served the run, and its spelling of the concurrency flag;
- :mod:`.facts` — the answer and each reason as typed records (their words:
  :mod:`analysis.report.advice_words`).
"""
