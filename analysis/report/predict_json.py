"""``loadknee predict --format json``: a prediction or a check as strict JSON, the bare facts.

The records of :mod:`analysis.predict.facts` through knee.json's :func:`~.knee_json.jsonable`
(NaN and infinities → ``null``, tuples → lists, dataclasses → objects keyed by field name), so a
script reads the same fields the words are made from::

    {"schema": 2, "prediction": Prediction}    # loadknee predict RUN_DIR ...
    {"schema": 2, "prediction": ..., "mix": LengthMix}    # ... --prompt-log LOG
    {"schema": 2, "check": Check}              # loadknee predict --check RUN_DIR OTHER_RUN

Schema 2: a check holds two agreements, ``deploy`` (the deploy figure against the run's deploy
answer) and ``offline`` (the offline batch against its knee), where schema 1 had the capacity's
``measured_low``, ``measured_high``, ``inside``, ``error`` and ``raw_error`` on the check itself,
held against the run's knee.

``allow_nan=False``: a number the model could not give is ``null``, never ``NaN``.
"""

from __future__ import annotations

import json

from analysis.predict.facts import Check, LengthMix, Prediction
from analysis.report.knee_json import jsonable

SCHEMA = 2


def prediction_json(p: Prediction, mix: LengthMix | None = None) -> str:
    """The prediction's facts as one JSON document (with ``mix``: the prompt log's lengths)."""
    doc = {"schema": SCHEMA, "prediction": jsonable(p)}
    if mix is not None:
        doc["mix"] = jsonable(mix)
    return json.dumps(doc, allow_nan=False, indent=2)


def check_json(c: Check) -> str:
    """The check's facts (the prediction inside) as one JSON document."""
    return json.dumps({"schema": SCHEMA, "check": jsonable(c)}, allow_nan=False, indent=2)
