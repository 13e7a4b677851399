"""Every rule an output names is a heading of docs/method.md, and no output says "seed 00x"."""

from __future__ import annotations

import re

from analysis import rules
from analysis.cli import main as analyze_main
from tests.support.paths import REPO
from tests.support.report_fixtures import write_run_dir

ROOT = REPO
METHOD = ROOT / "docs" / "method.md"
CITATION = re.compile(re.escape(rules.CITE_PREFIX) + r"([^)]+)\)")


def _headings() -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#{2,4} (.+)$", METHOD.read_text(), re.M)}


def test_every_registered_rule_is_a_heading_of_method_md():
    missing = sorted(set(rules.RULES.values()) - _headings())
    assert not missing, f"rules with no heading in docs/method.md: {missing}"


def test_every_rule_cited_in_the_outputs_is_a_heading(tmp_path, capsys):
    run = write_run_dir(tmp_path / "run", levels=(1, 2, 4, 8, 16), run_info={"prompt_source": {
        "kind": "log", "records": 20, "valid_records": 20}})  # fmt: skip
    assert analyze_main([str(run), "--quiet", "--sla-ms", "400"]) == 0
    printed = capsys.readouterr().out
    report = run / "report"
    texts = {
        "stdout": printed,
        **{name: (report / name).read_text() for name in
           ("report.html", "recommendations.yaml", "knee.json", "record.md")},
    }  # fmt: skip
    headings = _headings()
    cited: set[str] = set()
    for where, text in texts.items():
        text = re.sub(r"\s*\n\s*#?\s*", " ", text)  # a YAML comment may wrap a citation
        assert not re.search(r"seed 00\d", text, re.I), f'"seed 00x" in {where}'
        for name in CITATION.findall(text):
            assert name in headings, f"{where} cites a rule that is no heading: {name!r}"
            cited.add(name)
    # the outputs do cite rules: the deploy answer, the capacity figures, the withheld flag
    assert {"The answer to deploy", "Base capacity", "Context length"} <= cited


def test_no_seed_label_in_the_product_outside_the_method_sources():
    hits = []
    for base in (
        "README.md",
        "docs",
        "loadknee_core",
        "loadknee_locust",
        "analysis",
        "locustfiles",
    ):
        for path in [ROOT / base] if base.endswith(".md") else (ROOT / base).rglob("*"):
            if path.suffix not in (".py", ".md", ".html", ".js", ".txt", ".yaml") or "/." in str(
                path
            ):
                continue
            text = path.read_text(encoding="utf-8")
            if path == METHOD:
                text = text.split("\n## Sources", 1)[0]
            hits += [f"{path.relative_to(ROOT)}" for _ in re.finditer(r"seed 00\d", text, re.I)]
    assert not hits, f'"seed 00x" left in: {sorted(set(hits))}'
