"""The stepped sweep: what runs when, and the judgement that decides what comes next.

Pure where it can be (no locust, no clock):

- :mod:`.schedule` — the sweep as a state machine: stage, phase, users, when to stop;
- :mod:`.refine` — after each stage: refine between grid levels, go on, or stop past the knee;
- :mod:`.confidence` — stdlib intervals for a stage's throughput and tail (``--stage-seconds
  auto``), the same figures the analysis computes;
- :mod:`.judge` — the live judge: one long-lived analysis child, asked once per stage;
- :mod:`.childjobs` — one-off analysis children: the final report and a one-shot judgement.
"""
