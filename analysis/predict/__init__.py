"""What-if predictions: the capacity at lengths the run did not measure, from one run's fit.

:mod:`.facts` holds the fitted parameters and the prediction as typed records (no words);
:mod:`.fit` fits them from an analysed run (reusing the latency profile of
:mod:`analysis.cluster.profile`); :mod:`.batching` is the closed-loop model of continuous
batching; :mod:`.whatif` turns a fit and new lengths into a predicted capacity with an interval;
:mod:`.cli` is ``loadknee predict``. The words are :mod:`analysis.report.predict_words`'.
Never imports locust: a prediction is offline arithmetic on a recorded run.
"""
