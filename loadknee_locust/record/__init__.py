"""The run directory on the Locust side: where requests, stages and parameters are written.

- :mod:`.rundir` — create the run directory and write ``run.json`` (every parameter, no secret);
- :mod:`.recorder` — request events → ``requests.csv``, stage facts → ``stages.csv``, in every
  mode (local, master with worker rows);
- :mod:`.csvsink` — append rows to one contract CSV, flushed at least once a second.

The file names and columns themselves are :mod:`loadknee_core.contract`, shared with
:mod:`analysis`.
"""
