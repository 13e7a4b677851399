"""Latency targets (SLOs) and the concurrency that still meets them.

- :mod:`.targets` — the targets' syntax and parameters;
- :mod:`.evaluate` — goodput and each target's verdict per stage;
- :mod:`.advice` — the SLO capacity and how it changes the deploy answer;
- :mod:`.classes` — mixed traffic classes: each class's record table, SLO capacity, the binding one.
"""
