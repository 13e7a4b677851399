"""``loadknee predict --format json``: a prediction or a check as strict JSON, the bare facts.

The records of :mod:`analysis.predict.facts` through knee.json's :func:`~.knee_json.jsonable`
(NaN and infinities → ``null``, tuples → lists, dataclasses → objects keyed by field name), so a
script reads the same fields the words are made from::

    {"schema": 1, "prediction": Prediction}    # loadknee predict RUN_DIR ...
    {"schema": 1, "prediction": ..., "mix": LengthMix}    # ... --prompt-log LOG
    {"schema": 1, "check": Check}              # loadknee predict --check RUN_DIR OTHER_RUN

``allow_nan=False``: a number the model could not give is ``null``, never ``NaN``.
"""

from __future__ import annotations

import json

from analysis.predict.facts import Check, LengthMix, Prediction
from analysis.report.knee_json import jsonable

SCHEMA = 1


def prediction_json(p: Prediction, mix: LengthMix | None = None) -> str:
    """The prediction's facts as one JSON document (with ``mix``: the prompt log's lengths)."""
    doc = {"schema": SCHEMA, "prediction": jsonable(p)}
    if mix is not None:
        doc["mix"] = jsonable(mix)
    return json.dumps(doc, allow_nan=False, indent=2)


def check_json(c: Check) -> str:
    """The check's facts (the prediction inside) as one JSON document."""
    return json.dumps({"schema": SCHEMA, "check": jsonable(c)}, allow_nan=False, indent=2)
