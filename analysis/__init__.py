"""loadknee's offline analysis: run directory → per-stage summary → knee → verdicts → report.

Pure pandas/matplotlib. Never imports locust or gevent (a test checks this).

- :mod:`.cli` — ``loadknee analyze``; :mod:`.pipeline` — run directory → every analysis object;
- :mod:`.inputs` — read and validate the run directory, server metrics, ``nvidia-smi`` captures;
- :mod:`.summary` — the record table: one row per stage over its measured window;
- :mod:`.baseline` — the single-user yardstick every later stage is compared against;
- :mod:`.data_check` — whether a stage has enough usable rows to be judged, and why not;
- :mod:`.intervals` — per-stage intervals on output tok/s and the e2e tail (batch means);
- :mod:`.knee` — the knee, the red line and a verdict per stage; :mod:`.knee_signals` — its rules;
- :mod:`.knee_confidence` — how sure the knee is, from resampled time windows;
- :mod:`.failure_mix` — each stage's failures by outcome, status and message;
- :mod:`.failures` — warnings: stages too small to trust, runs whose every request failed;
- :mod:`.diagnosis` — the likely bottleneck per stage; :mod:`.diagnosis_rules` — its rules;
- :mod:`.recommend` — deployment settings, each with its reason;
- :mod:`.run_cut` — whether and where a run was cut short;
- :mod:`.deploy` — the one concurrency to deploy and the rule that bound it;
- :mod:`.slo`, :mod:`.slo_eval`, :mod:`.slo_advice` — latency targets, goodput per stage, advice;
- :mod:`.live` — the knee of a run still being written, once; :mod:`.live_judge` — as a child;
- :mod:`.verify` — whether a re-run still matches the original's answer (PASS/FAIL);
- :mod:`.rules` — the method's rule names; :mod:`.model` — the value objects passed between steps;
- :mod:`.numeric` — a missing number read as None and printed as —; :mod:`.yaml_text` — YAML;
- :mod:`.report` — the record table, plots, ``knee.json`` and the HTML page;
- :mod:`.importers` — other tools' results (vLLM's benchmark, GuideLLM, AIPerf) → a run directory;
- :mod:`.compare` — two or more runs side by side, ``loadknee compare``.
"""

from __future__ import annotations
