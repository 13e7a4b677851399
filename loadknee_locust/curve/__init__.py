"""Closed-loop replay of a log's in-flight curve (``--llm-replay-curve``).

- :mod:`.plan` — the log's in-flight curve per replay second, cut into windows over the scales
  (stdlib, no clock);
- :mod:`.source` — the prompt source: lengths of the log's records around the replayed time,
  each record sent once, split across workers;
- :mod:`.replay` — the plan as the stepped shape's schedule and the users at each tick;
- :mod:`.live` — the log's curve beside the measured in-flight count, for the web UI.
"""
