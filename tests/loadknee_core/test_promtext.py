"""Pure parts of telemetry: Prometheus text → samples, label sets, URL redaction, DCGM mapping."""

from __future__ import annotations

import io
import math

import pytest

from loadknee_core import dcgm
from loadknee_core.promtext import (
    Sample,
    parse_labels,
    parse_lines,
    redact_url,
    render_labels,
)
from loadknee_core.redaction import strip_credentials

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 5.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 5.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.25
"""


def test_parse_keeps_sample_names_as_exposed() -> None:
    parsed = parse_lines(io.StringIO(VLLM_TEXT))
    assert parsed.error is None
    assert [s.metric for s in parsed.samples] == [
        "vllm:num_requests_running",
        "vllm:num_preemptions_total",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
    ]
    assert parsed.samples[0].labels == {"engine": "0", "model_name": "m"}
    assert parsed.samples[1].value == 2.0


@pytest.mark.parametrize(
    ("text", "n_samples", "has_error"),
    [
        ("", 0, False),
        ("<html><body>502 Bad Gateway</body></html>", 0, True),
        ('{"error": "not found"}', 0, True),
        ("good 1\nthen garbage here\n", 1, True),  # what was read before the bad line is kept
        ("x NaN\n", 1, False),
    ],
)
def test_parse_never_raises(text: str, n_samples: int, has_error: bool) -> None:
    parsed = parse_lines(io.StringIO(text))
    assert len(parsed.samples) == n_samples
    assert (parsed.error is not None) == has_error
    if has_error:
        # words are the product: the error recorded for an unreadable scrape
        assert parsed.error.startswith("not Prometheus text")
        assert "\n" not in parsed.error


def test_nan_value_stays_nan() -> None:
    assert math.isnan(parse_lines(io.StringIO("x NaN\n")).samples[0].value)


@pytest.mark.parametrize(
    "labels",
    [{}, {"a": "1"}, {"model_name": "org/model", "engine": "0"}, {"q": 'say "hi"\\n', "n": "a\nb"}],
)
def test_labels_round_trip(labels: dict[str, str]) -> None:
    assert parse_labels(render_labels(labels)) == labels


def test_render_labels_is_sorted_prometheus_style() -> None:
    assert render_labels({"b": "2", "a": 'x"y'}) == 'a="x\\"y",b="2"'


def test_parse_labels_rejects_non_labels() -> None:
    with pytest.raises(ValueError, match="label set"):
        parse_labels("not labels")


def _reference_labels(text: str) -> dict[str, str] | None:
    """The reference parser's reading of ``text`` as a sample's label set (None: refused)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(f"x{{{text}}} 0\n"))
    except Exception:  # whatever the reference refuses with
        return None
    samples = [s for f in families for s in f.samples]
    return dict(samples[0].labels) if len(samples) == 1 else None


#: label-set texts: what render_labels writes, and what the exposition format also allows
LABEL_TEXTS = [
    "",
    'a="1"',
    'a="1",b="2"',
    'a="1", b="2"',
    'a="1",',
    'model_name="org/model",engine="0"',
    'q="say \\"hi\\""',
    'p="C:\\\\dir"',
    'n="a\\nb"',
    't="tab\\tkept"',
    'e=""',
    'u="ünïcode, with = and {braces}"',
    "not labels",
    'a="1" b="2"',
    'a="unterminated',
    "a=1",
    '="x"',
    'a="1",,b="2"',
]


@pytest.mark.parametrize("text", LABEL_TEXTS)
def test_parse_labels_reads_as_the_reference_parser(text: str) -> None:
    expected = _reference_labels(text)
    if expected is None:
        with pytest.raises(ValueError, match="label set"):
            parse_labels(text)
    else:
        assert parse_labels(text) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/metrics"),
        ("http://user:s3cret@host:9400/metrics", "http://host:9400/metrics"),
        ("https://token@host/metrics?x=1", "https://host/metrics?x=1"),
        ("http://u:p@[::1]:80/m", "http://[::1]:80/m"),
        ("http://user:pw@host:8000/v1?x=1", "http://host:8000/v1?x=1"),
        ("https://tok@h", "https://h"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("not a url with @ sign", "not a url with @ sign"),
        ("", ""),
    ],
)
def test_redact_url_and_strip_credentials(url: str, expected: str) -> None:
    """The telemetry's ``redact_url`` and the run directory's ``strip_credentials`` (one rule,
    :mod:`loadknee_core.redaction`) strip the same way."""
    assert redact_url(url) == expected
    assert strip_credentials(url) == expected


def S(metric: str, value: float, **labels: str) -> Sample:
    return Sample(metric, labels, value)


def test_dcgm_rows_per_gpu() -> None:
    samples = [
        S("DCGM_FI_DEV_FB_USED", 30000, gpu="1"),
        S("DCGM_FI_DEV_FB_FREE", 50000, gpu="1"),
        S("DCGM_FI_DEV_FB_USED", 1000, gpu="0"),
        S("DCGM_FI_DEV_FB_FREE", 80000, gpu="0"),
        S("DCGM_FI_DEV_FB_RESERVED", 920, gpu="0"),
        S("DCGM_FI_DEV_GPU_UTIL", 87, gpu="0"),
        S("DCGM_FI_PROF_SM_ACTIVE", 0.42, gpu="0"),
        S("DCGM_FI_PROF_DRAM_ACTIVE", 0.25, gpu="0"),
        S("DCGM_FI_DEV_MEM_COPY_UTIL", 60, gpu="0"),
        S("DCGM_FI_DEV_MEM_COPY_UTIL", 33, gpu="1"),
        S("vllm:num_requests_running", 3),
    ]
    rows = dcgm.gpu_rows(samples, 12.5)
    assert [r["gpu_index"] for r in rows] == [0, 1]
    g0, g1 = rows
    assert g0 == {
        "timestamp_unix_s": 12.5,
        "gpu_index": 0,
        "source": "dcgm",
        "memory_used_mib": 1000,
        "memory_total_mib": 81920,
        "gpu_util_pct": 87,
        "sm_util_pct": pytest.approx(42.0),
        "mem_bw_util_pct": pytest.approx(25.0),  # DRAM_ACTIVE wins over MEM_COPY_UTIL
        "power_w": None,  # no DCGM_FI_DEV_POWER_USAGE sample
    }
    assert g1["memory_total_mib"] == 80000
    assert g1["mem_bw_util_pct"] == 33  # fallback: MEM_COPY_UTIL
    assert g1["gpu_util_pct"] is None and g1["sm_util_pct"] is None  # missing, not 0


def test_dcgm_total_field_and_no_dcgm() -> None:
    rows = dcgm.gpu_rows([S("DCGM_FI_DEV_FB_TOTAL", 81559, gpu="0")], 1.0)
    assert rows[0]["memory_total_mib"] == 81559 and rows[0]["memory_used_mib"] is None
    assert dcgm.gpu_rows([S("vllm:num_requests_running", 1)], 1.0) == []
    assert dcgm.gpu_rows([S("DCGM_FI_DEV_GPU_UTIL", 1)], 1.0)[0]["gpu_util_pct"] == 1
    assert dcgm.gpu_rows([S("DCGM_FI_DEV_UNKNOWN_THING", 1)], 1.0) == []  # not a field it maps
