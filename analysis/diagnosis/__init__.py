"""What limits each stage, and what its failures were.

- :mod:`.bottleneck` — the likely bottleneck per stage; :mod:`.rules` — its ordered rules;
- :mod:`.failure_mix` — each stage's failures by outcome, status and message;
- :mod:`.failures` — warnings: stages too small to trust, runs whose every request failed.
"""
