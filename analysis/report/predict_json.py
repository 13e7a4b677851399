"""``loadknee predict --format json``: a prediction or a check as strict JSON, the bare facts.

The records of :mod:`analysis.predict.facts` through knee.json's :func:`~.knee_json.jsonable`
(NaN and infinities → ``null``, tuples → lists, dataclasses → objects keyed by field name), so a
script reads the same fields the words are made from::

    {"schema": 1, "prediction": Prediction}    # loadknee predict RUN_DIR ...
    {"schema": 1, "check": Check}              # loadknee predict --check RUN_DIR OTHER_RUN

``allow_nan=False``: a number the model could not give is ``null``, never ``NaN``.
"""

from __future__ import annotations

import json

from analysis.predict.facts import Check, Prediction
from analysis.report.knee_json import jsonable

SCHEMA = 1


def prediction_json(p: Prediction) -> str:
    """The prediction's facts as one JSON document."""
    return json.dumps({"schema": SCHEMA, "prediction": jsonable(p)}, allow_nan=False, indent=2)


def check_json(c: Check) -> str:
    """The check's facts (the prediction inside) as one JSON document."""
    return json.dumps({"schema": SCHEMA, "check": jsonable(c)}, allow_nan=False, indent=2)
