"""What ``analysis`` and ``loadknee_locust`` both need, at the bottom of both: stdlib only.

Both packages import from here and this package imports neither, so the arrows between them point
one way (``tests/project/test_import_arrows.py`` checks it). It holds the run-directory contract
(:mod:`.contract`) and the one secret rule (:mod:`.redaction`); a stage's batch-means intervals
(:mod:`.confidence`) and the refusal rule (:mod:`.refusals`), the knee's parameters and flags
(:mod:`.knee_params`) and the red line's rule (:mod:`.red_line`) that the live sweep and the
analysis both apply; the latency targets' parser (:mod:`.slo_targets`) and the traffic-class spec
(:mod:`.traffic_classes`); a prompt log's reader (:mod:`.logentry`, :mod:`.logindex`,
:mod:`.traces`, :mod:`.tracetime`); Prometheus text and DCGM names (:mod:`.promtext`,
:mod:`.dcgm`); the flags declared on a parameter class (:mod:`.flags`), the argument parser every
``loadknee`` command uses (:mod:`.command_parser`) and a missing number read as None
(:mod:`.numeric`).
"""

from __future__ import annotations

__version__ = "0.2.0"  # the only place the version is written (pyproject reads it)
