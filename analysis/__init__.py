"""loadknee's offline analysis: run directory → per-stage summary → knee → verdicts → report.

Pure pandas/matplotlib. Never imports locust or gevent (a test checks this).
"""

from __future__ import annotations
