"""Batch size vs concurrency: k prompts in each /v1/completions request.

    locust -f locustfiles/batch.py --headless -H http://127.0.0.1:8000 \\
        --llm-batch-size 4 --llm-levels 1,2,4,8 --llm-input-tokens 256 --llm-output-tokens 64

Each request carries ``--llm-batch-size`` fixed-length prompts; ``requests.csv`` rows say the
batch size, and their token targets and counts are per request (k × the per-prompt lengths).
Run it once per batch size and compare the runs (``loadknee compare``).
"""

from __future__ import annotations

from locust import events

from loadknee_locust import BatchCompletionsUser, KneeShape, install  # noqa: F401  (KneeShape: the stepped shape Locust picks up)

install(events)


class Batch(BatchCompletionsUser):
    """Reports under the name ``completions-batch``."""
