"""Open-loop load: requests sent at planned times (rate stages, a log's arrivals), never waiting
for the answers before the next one goes (see :mod:`loadknee_locust.arrivals.plan`)."""
