"""The knee: where throughput stops growing while the tail leaves the baseline.

- :mod:`.facts` — what each rule measured, as typed records (worded by
  :mod:`analysis.report.knee_words`, a stage's reasons by :mod:`analysis.report.stage_reasons`);
- :mod:`.signals` — each rule evaluated on one stage, with its numbers and threshold;
  :mod:`.client_signals` — the client-side queue's signals;
- :mod:`.fit` — the knee judged on all stages at once: a rise-then-plateau fit with an interval;
- :mod:`.params` — the thresholds, their flags and the values a run recorded;
- :mod:`.find` — the verdict per stage, the knee and the red line;
- :mod:`.confidence` — how sure the knee is, from resampled time windows.

The package returns facts and never words: :mod:`analysis.report` words them (the knee of a run
still being written is :mod:`analysis.live`, which words its answer too).
"""
