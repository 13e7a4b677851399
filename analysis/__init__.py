"""loadknee's offline analysis: run directory → stages → knee → SLO → advice → report.

Pure pandas/matplotlib. Never imports locust or gevent (a test checks this). The steps, in the
order the pipeline runs them, each a package:

- :mod:`.inputs` — read and validate the run directory, server metrics, ``nvidia-smi`` captures;
- :mod:`.stages` — the record table (one row per stage), the single-user baseline, per-stage
  intervals, whether a stage has enough rows to judge, whether the run was cut short;
- :mod:`.knee` — each stage's signals, the knee and the red line, how sure the knee is, and the
  live judge the sweep asks after every stage;
- :mod:`.diagnosis` — the likely bottleneck per stage and what the failures were;
- :mod:`.slo` — latency targets: their syntax, goodput per stage, the SLO capacity;
- :mod:`.advice` — the settings to deploy, each with its reason, and the one concurrency;
- :mod:`.report` — the record table, plots, ``knee.json``, YAML and the HTML page;
- :mod:`.compare` — runs side by side (``loadknee compare``) and re-run checks (``verify``);
- :mod:`.importers` — other tools' results (vLLM's benchmark, GuideLLM, AIPerf) → a run directory;
- :mod:`.cluster` — from the knee to the cluster: KEDA, HPA, alerts, latency profile, energy, llm-d;
- :mod:`.traffic` — a production log's shape before any load (``loadknee trace``) and its headroom.

At the top level only the entry points and what every step shares: :mod:`.cli`
(``loadknee analyze``), :mod:`.pipeline` (run directory → every analysis object), :mod:`.model`
(the value objects passed between steps), :mod:`.rules` (the method's rule names) and
:mod:`.numeric` (a missing number read as None and printed as —).
"""

from __future__ import annotations
