"""HTML report: self-contained, holds the table/verdicts/recommendations, never a secret."""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser

import pytest

from analysis.model import PERCENTILE_METHOD
from analysis.report.html import FIRST_PLOTS, HtmlReport, render_html
from analysis.report.html_params import is_secret_key, redact
from analysis.report.plots import png_bytes, throughput_figure
from analysis.report.table import record_frame
from tests.support.report_fixtures import (
    SECRET,
    no_global_figures,  # noqa: F401 (autouse fixture)
    seed002_baseline,
    seed002_knee,
    seed002_recs,
    seed002_summary,
)


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in ("meta", "img", "br"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1:]}>"
        self.open.pop()


#: names whose values are withheld (any casing or separator), and look-alikes that are not
SECRET_KEYS = ("api_key", "OPENAI_API_KEY", "llm_api_key_env", "hfToken", "db-password",
               "Authorization", "client_secret")  # fmt: skip
PLAIN_KEYS = ("max_tokens", "llm_input_tokens", "keyboard", "model")


@pytest.mark.parametrize("key", SECRET_KEYS + PLAIN_KEYS)
def test_is_secret_key(key: str) -> None:
    assert is_secret_key(key) is (key in SECRET_KEYS)


def test_redact_nested_values_and_urls() -> None:
    info = {
        "target": {"host": "http://user:pw@gpu-host:8000/v1", "api_key": SECRET},
        "headers": [{"Authorization": "Bearer abc"}, {"x": "sk-abcdef"}],
        "output_tokens": 64,
    }
    clean = redact(info)
    assert clean == {
        "target": {"host": "http://gpu-host:8000/v1"},
        "headers": [{}, {"x": "[withheld]"}],
        "output_tokens": 64,
    }


def _report(**overrides) -> HtmlReport:
    png = png_bytes(throughput_figure(seed002_summary(), seed002_knee()))
    values = dict(
        run_id="run-<1>",
        record=record_frame(seed002_summary(), seed002_knee(untrusted_stage=2)),
        knee=seed002_knee(untrusted_stage=2),
        baseline=seed002_baseline(),
        recommendations=seed002_recs(),
        recommendations_yaml="max_concurrency: 24  # the stage before the knee\n",
        run_info={
            "api_key": SECRET,
            "nested": {"password": SECRET, "note": SECRET},
            "levels": [4, 16, 24, 32, 48],
            "model": "qwen-7b",
        },
        images={"Throughput": png},
        warnings=("external interference: P95 is 2.1× the median",),
    )
    values.update(overrides)
    return HtmlReport(**values)


def test_html_is_well_formed_and_self_contained() -> None:
    page = render_html(_report())
    parser = _Collect()
    parser.feed(page)
    assert parser.open == []
    assert parser.tags.count("table") >= 4
    srcs = [v for k, v in parser.attrs if k == "src"]
    assert srcs and all(v and v.startswith("data:image/png;base64,") for v in srcs)
    ids = {v for k, v in parser.attrs if k == "id"}
    hrefs = [v or "" for k, v in parser.attrs if k == "href"]
    assert hrefs and all(h.startswith("#") and h[1:] in ids for h in hrefs)  # on the page
    png = base64.b64decode(srcs[0].split(",", 1)[1])
    assert png.startswith(b"\x89PNG")
    assert "http://" not in page and "https://" not in page  # no CDN, nothing external


def test_html_contains_table_verdicts_reasons_and_recommendations() -> None:
    page = render_html(_report())
    assert "<th>P99 s</th>" in page and "<th>verdict</th>" in page
    assert "red line" in page and "comfortable*" in page and "untrusted: client-bound" in page
    assert "#c62828" in page  # red-line colour
    assert "marginal gain 0.07 of the single-user rate" in page
    assert "--max-num-seqs 24" in page and "max_concurrency: 24" in page
    # words are the product: a shell command a user copies, not prose
    assert "vllm serve qwen-7b" in page
    assert "16–19" in page  # watermark card
    assert "external interference" in page
    assert html.escape(PERCENTILE_METHOD) in _body(page, "method")
    assert "run-&lt;1&gt;" in page  # escaped


def test_html_never_contains_a_secret() -> None:
    page = render_html(_report())
    assert SECRET not in page
    assert "api_key" not in page and "password" not in page
    assert "[withheld]" in page  # the nested note value looked like a key


def test_html_without_knee_or_recommendations() -> None:
    page = render_html(
        _report(knee=None, recommendations=None, baseline=None, images={}, warnings=())
    )
    for key in ("recommendations", "plots", "baseline"):  # one paragraph saying there is none
        assert re.fullmatch(r"<p>[^<]+</p>", _body(page, key)), key
    (png,) = _report().images.values()
    full = render_html(_report(images={FIRST_PLOTS[0]: png}))
    for key in ("recommendations", "plots", "baseline"):  # each has its table, plot or list
        assert not re.fullmatch(r"<p>[^<]+</p>", _body(full, key)), key


def _body(page: str, key: str) -> str:
    """The body of the page's section ``key`` (after its heading)."""
    section = page.split(f'<section id="{key}">', 1)[1].split("</section>", 1)[0]
    return section.split("</h2>\n", 1)[1]


def test_a_one_user_stage_is_headed_in_the_singular() -> None:
    import dataclasses

    knee = seed002_knee()
    first = dataclasses.replace(knee.stages[0], target_users=1)
    page = render_html(_report(knee=dataclasses.replace(knee, stages=(first, *knee.stages[1:]))))
    assert "<h3>1 user — " in page and "1 users" not in page
    assert "<h3>16 users — " in page
