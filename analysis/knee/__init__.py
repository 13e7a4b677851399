"""The knee: where throughput stops growing while the tail leaves the baseline.

- :mod:`.facts` — what each rule measured, as typed records (worded by
  :mod:`analysis.report.knee_words`, a stage's reasons by :mod:`analysis.report.stage_reasons`);
- :mod:`.signals` — each rule evaluated on one stage, with its numbers and threshold;
  :mod:`.client_signals` — the client-side queue's signals;
- :mod:`.fit` — the knee judged on all stages at once: a rise-then-plateau fit with an interval;
- the thresholds, their flags and the values a run recorded: :mod:`loadknee_core.knee_params`;
- :mod:`.find` — the knee and the red line, the steps in order: :mod:`.knee_inputs` (the table
  taken apart once), :mod:`.stage_verdict` (one stage's verdict), :mod:`.queue_demotions` and
  :mod:`.noisy_stages` (knees the queue contradicts), :mod:`.dips`, :mod:`.slot_bounds` (the
  slots a queue proved);
- :mod:`.confidence` — how sure the knee is, from resampled time windows.

The package returns facts and never words: :mod:`analysis.report` words them (the knee of a run
still being written is :mod:`analysis.live`, which words its answer too).
"""
