"""The record table's rows: one per stage, over its measured window.

- :mod:`.summary` — the record table itself (throughput, latency percentiles, telemetry);
- :mod:`.baseline` — the single-user yardstick every later stage is compared against;
- :mod:`.intervals` — per-stage intervals on output tok/s and the e2e tail (batch means);
- :mod:`.data_check` — whether a stage has enough usable rows to be judged, and why not;
- :mod:`.coverage` — whether the recorded rows cover each stage's window (a cut requests.csv);
- :mod:`.run_cut` — whether and where a run was cut short;
- :mod:`.array_intervals` — the same intervals with numpy, for the analysis's speed;
- :mod:`.client_queue` — how many requests the server ran and how many waited, from the client;
- :mod:`.prefix_cache` — each stage's prefix-cache hit rate from the server's counters;
- :mod:`.conversations` — multi-turn runs: latency by turn.
"""
