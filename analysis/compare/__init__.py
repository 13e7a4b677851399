"""Comparing two or more analysed runs: benchmark vs replay, before vs after, 1 vs N replicas, ….

- :mod:`.kind` — which comparison the runs make, read from their ``run.json``;
- :mod:`.core` — the side-by-side table per concurrency and what it means, as facts
  (:mod:`.facts`; :mod:`analysis.report.compare_words` words them);
- :mod:`.cli` — ``loadknee compare``: analyse, print and write the comparison.
"""
