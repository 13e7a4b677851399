"""The scrape process's parse-and-write: paced or not, the same bytes in server_metrics.csv."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from loadknee_core.contract import SERVER_METRIC_COLUMNS
from loadknee_core.promtext import parse_lines
from loadknee_locust.record.csvsink import CsvSink
from loadknee_locust.telemetry.scrapeproc import Pacer, record_scrape

BIG = "".join(
    f'vllm:e2e_request_latency_seconds_bucket{{le="{0.01 * (i % 40 + 1):.2f}",'
    f'model_name="m\\"q",engine="{i // 40}"}} {i * 3}\n'
    for i in range(500)
)
BODIES = {
    "big": "# TYPE vllm:e2e_request_latency_seconds histogram\n" + BIG,
    "odd values": 'a{x="1"} NaN\nb +Inf\nc{y="new\\nline"} -3.5e-3\n',
    "malformed tail": BIG[:2000] + "<html>not metrics</html>\n" + BIG[2000:],
    "empty": "",
}


def written(tmp_path: Path, name: str, text: str, pacer: Pacer | None) -> bytes:
    path = tmp_path / f"{name}.csv"
    sink = CsvSink(path, SERVER_METRIC_COLUMNS)
    record_scrape(sink, text, "http://h/metrics", 1700000000.25, pacer)
    sink.close()
    return path.read_bytes()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_paced_parse_writes_what_the_plain_one_does(tmp_path: Path, name: str) -> None:
    text = BODIES[name]
    plain = written(tmp_path, "plain", text, None)
    paced = written(tmp_path, "paced", text, Pacer(burst_s=0.0, rest_s=0.0))  # rests every check
    assert paced == plain
    rows = plain.decode().splitlines()[1:]
    parsed = parse_lines(io.StringIO(text))
    assert len(rows) == len(parsed.samples) + (parsed.error is not None or not parsed.samples)
    if name == "malformed tail":
        # words are the product: the error recorded for an unreadable scrape
        assert 0 < len(parsed.samples) < 500 and "not Prometheus text" in rows[-1]


def test_pacer_rests_once_per_burst_and_passes_everything_through() -> None:
    pacer = Pacer(burst_s=0.0, rest_s=0.002)
    started = time.perf_counter()
    assert list(pacer.paced(range(64), every=16)) == list(range(64))
    assert time.perf_counter() - started >= 4 * 0.002  # four checks, each over its budget
    lazy = Pacer(burst_s=60.0, rest_s=1.0)  # never over budget: never sleeps
    started = time.perf_counter()
    assert list(lazy.paced(range(1000))) == list(range(1000))
    assert time.perf_counter() - started < 1.0
