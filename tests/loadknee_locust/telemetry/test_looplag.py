"""The event-loop lag meter under gevent, in this (unpatched) test process: no Locust."""

from __future__ import annotations

import os
import time

import gevent
import pytest

from loadknee_locust.telemetry.looplag import Lag, LoopLagMeter, host_load


def test_a_blocked_hub_is_recorded_as_lag_and_then_forgotten() -> None:
    meter = LoopLagMeter(interval_s=0.02)
    assert meter.take() == Lag(None, None)  # not started: nothing measured, not 0
    meter.start()
    try:
        gevent.sleep(0.1)
        meter.take()  # forget the start
        time.sleep(0.2)  # one greenlet holds the hub: the meter's sleep ends 0.2 s late
        gevent.sleep(0.05)
        lag = meter.take()
        assert lag.max_ms is not None and lag.mean_ms is not None
        assert lag.max_ms >= 150
        assert 0 <= lag.mean_ms <= lag.max_ms
        gevent.sleep(0.1)
        after = meter.take()  # the stall is in the previous take, not this one
        assert after.max_ms is not None and after.max_ms < lag.max_ms
    finally:
        meter.stop()
    assert not meter.running and meter.take() == Lag(None, None)


def test_a_take_during_a_stall_reports_the_sleep_in_progress() -> None:
    """Taken while the meter's sleep is overdue (the hub was held since), the lag so far is
    reported: a stall longer than the sample interval is never read as no lag."""
    meter = LoopLagMeter(interval_s=0.02)
    meter.start()
    try:
        gevent.sleep(0.05)
        meter.take()
        gevent.sleep(0)  # let the meter start its next sleep
        time.sleep(0.2)
        lag = meter.take()  # the hub has not run the meter since
        assert lag.max_ms is not None and lag.max_ms >= 150
    finally:
        meter.stop()


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0"):
        LoopLagMeter(interval_s=0)


def test_host_load_reads_the_machine() -> None:
    load = host_load()
    assert load.cpus == os.cpu_count()
    assert load.load_1m is None or load.load_1m >= 0
