"""The report's workload section (prefix cache, conversations, classes) from its dict: pure."""

from __future__ import annotations

import html
import re

from analysis.report.workload import workload_html

#: a class's broken SLO, as the classes' judgement words it (the input here)
BREAK = "e2e P95 1,399 ms > 1000 ms"


def test_an_empty_workload_writes_nothing() -> None:
    assert workload_html({}) == ""


def test_the_section_shows_each_part_with_missing_numbers_as_dashes() -> None:
    sections = {
        "prefix_cache": {
            "source": "prefix-cache hit rate: from vllm:… (vllm)",
            "stages": [
                {"stage": 0, "target_users": 1, "prefix_cache_queries": 1280.0,
                 "prefix_cache_hits": 1024.0, "prefix_cache_hit_pct": 80.0},
                {"stage": 1, "target_users": 4, "prefix_cache_queries": None,
                 "prefix_cache_hits": None, "prefix_cache_hit_pct": None},  # not measured
            ],
            "hit_miss_ttft": [{"stage": 1, "target_users": 4, "hits": 3, "misses": 0,
                               "hit_ttft_p50_ms": 41.25, "miss_ttft_p50_ms": None}],
        },
        "conversations": {"turns": 3, "conversations": 5, "completed": 4, "cut": 1, "by_turn": [
            {"turn": 0, "requests": 5, "prompt_tokens_mean": 320.0, "ttft_p50_ms": 20.0,
             "ttft_p95_ms": 30.0, "e2e_p50_ms": 100.0, "e2e_p95_ms": 120.0}]},
        "classes": {"binding": "summ", "text": "binding class: summ breaks <first>", "classes": [
            {"name": "summ", "weight": 30.0, "input_tokens": 512, "output_tokens": 32,
             "slo_limits": "e2e P95 ≤ 1000 ms", "slo_capacity": 8, "stages": [
                 {"target_users": 16, "share_pct": 29.5, "ok": 40, "output_tok_s": 99.5,
                  "ttft_p95_ms": 50.0, "e2e_p95_ms": 1399.0, "slo_met": False,
                  "slo_breaks": [BREAK], "good_pct": None,
                  "goodput_rps": None}]}]},
    }  # fmt: skip
    page = workload_html(sections)
    for part in ("<h3>Prefix cache</h3>", "<h3>Conversations</h3>", "<h3>Traffic classes</h3>"):
        assert part in page
    assert page.count("<tr><td") == 1 + 1 + 1 + 1  # the unmeasured stage has no row
    assert '<td class="n">80</td>' in page and '<td class="n">41.2</td>' in page
    assert '<td class="n">—</td>' in page  # the missing miss TTFT
    # 5 conversations, 4 with every turn answered, 1 cut: the three numbers in that order
    assert re.search(r"<h3>Conversations</h3><p>\D*5\D+4\D+1\D", page)
    # the binding class's heading is marked: it differs from the same class's when none binds
    unbound = workload_html({"classes": {**sections["classes"], "binding": None}})
    heading, plain = (re.search(r"<h4>(.*?)</h4>", p).group(1) for p in (page, unbound))
    assert heading.startswith("summ") and plain.startswith("summ") and heading != plain
    assert "broken" in page and html.escape(BREAK) in page
    assert "&lt;first&gt;" in page  # every text escaped


def test_a_prefix_cache_that_never_hit_shows_no_table_of_zeros() -> None:
    zeros = {
        "source": "prefix-cache hit rate: from vllm:… (vllm)",
        "stages": [{"stage": s, "target_users": u, "prefix_cache_queries": 4096.0 * u,
                    "prefix_cache_hits": 0.0, "prefix_cache_hit_pct": 0.0}
                   for s, u in enumerate((1, 2, 4))],
        "hit_miss_ttft": [{"stage": 1, "target_users": 2, "hits": 0, "misses": 24,
                           "hit_ttft_p50_ms": None, "miss_ttft_p50_ms": 30.0}],
    }  # fmt: skip
    assert workload_html({"prefix_cache": zeros}) == ""
    one_hit = {**zeros, "stages": [*zeros["stages"][:2], {**zeros["stages"][2],
               "prefix_cache_hits": 512.0, "prefix_cache_hit_pct": 3.1}]}  # fmt: skip
    assert "<h3>Prefix cache</h3>" in workload_html({"prefix_cache": one_hit})
    seen = {**zeros, "hit_miss_ttft": [{**zeros["hit_miss_ttft"][0], "hits": 2}]}
    assert "<table>" in workload_html({"prefix_cache": seen})
