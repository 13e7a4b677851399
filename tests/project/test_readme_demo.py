"""The README's sample of ``loadknee demo`` has the shape of a real run (issue 41, item 3).

The golden shape comes from a real demo run (tests/e2e/test_demo.py checks every run against it
and rewrites it with ``LOADKNEE_UPDATE_GOLDEN=1``); here the README's sample is held to the same
shape, so a change to what the demo prints fails until the README shows a new real run
(``python -m tests.support.demo_shape OUTPUT``, tests/support/demo_shape.py).
"""

from __future__ import annotations

from tests.support import demo_shape


def test_the_readme_sample_has_the_shape_of_a_real_run() -> None:
    sample = demo_shape.readme_sample(demo_shape.README.read_text(encoding="utf-8"))
    golden = demo_shape.GOLDEN.read_text(encoding="utf-8").splitlines()
    assert demo_shape.shape(sample) == golden, (
        "README.md's demo sample no longer has the shape of a real run: put a new run in it "
        "with `python -m tests.support.demo_shape OUTPUT` (tests/support/demo_shape.py)"
    )


def test_the_readme_sample_warns_about_nothing() -> None:
    sample = demo_shape.readme_sample(demo_shape.README.read_text(encoding="utf-8"))
    assert "warning" not in sample.lower()


RUN = """\
[demo] simulator at http://127.0.0.1:41234
[loadknee] stage 1/2 (2 users) measure | 3 requests, 0 errors | 9 s left
[loadknee] stage 2/2 (8 users) measure | 30 requests, 0 errors | 2 s left
run directory: /tmp/x/runs/20261205-093925
users  reqs  secs  P50 s  verdict
-----  ----  ----  -----  --------
    1    20  13.9  0.681  0.688  baseline
    2    24  9.00  0.724  0.735  comfortable
"""


def test_the_shape_masks_what_changes_between_good_runs() -> None:
    other = (
        RUN.replace("41234", "5000")
        .replace("20261205-093925", "20261206-101010")
        .replace("    2    24  9.00  0.724  0.735  comfortable\n", "")
        .replace("(2 users) measure", "(4 users) warmup")
        .replace("-----  ----", "------  -----")
    )
    # words are the product: the README a user reads
    assert (
        demo_shape.shape(other)
        == demo_shape.shape(RUN)
        == [
            "[demo] simulator at <url>",
            "run directory: <run_dir>",
            "users reqs secs PN s verdict",
            "-- -- -- -- --",
            "<row>",
        ]
    )


def test_a_warning_changes_the_shape() -> None:
    warned = RUN + "warning: 1 user: only 13 requests over 9.0 s measured\n"
    assert demo_shape.shape(warned) != demo_shape.shape(RUN)


def test_the_sample_keeps_two_progress_lines_and_placeholders() -> None:
    sample = demo_shape.sample_from_run(RUN.replace("/tmp/x/runs", "runs"))
    assert "http://127.0.0.1:<port>" in sample and "runs/<run_id>" in sample
    assert sample.count("[loadknee] stage") == 2 and demo_shape.shape(sample) == demo_shape.shape(
        RUN
    )
