"""Old import path of the stepped shapes, kept so locustfiles written before the layout work.

New code imports them from :mod:`loadknee_locust` (or :mod:`loadknee_locust.plugin.shape`).
"""

from __future__ import annotations

from loadknee_locust.plugin.shape import KneeShape, SteppedShape

__all__ = ["KneeShape", "SteppedShape"]
