"""From the knee to the serving stack: autoscaler, alert rules, latency profile, energy, llm-d.

Every module here reads an already-analysed run (:class:`analysis.pipeline.Analysis`) and
writes one file a cluster consumes; none of them judges anything the knee did not already say.
:mod:`.emit` writes the chosen ones into the run's ``report/`` folder.
"""
