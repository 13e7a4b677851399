"""The shape of ``loadknee demo``'s output, which the README's sample shares with a real run.

The README shows one real demo run. Its numbers change from run to run, but its lines must not
drift from what the demo prints: :func:`shape` keeps the structure of the output (which lines, in
which order, their fixed words) and masks the rest: numbers, the port, the run directory, the
record table's rows (as many as the run had stages), the progress lines (the README shows a few)
and the sentences that state a result (the answer, its why and fix, the sweep's stop line). The
golden shape is ``tests/support/data/golden/demo_shape.txt``: tests/e2e/test_demo.py holds a real
run to it (``LOADKNEE_UPDATE_GOLDEN=1`` rewrites it from that run) and
tests/project/test_readme_demo.py holds the README's sample to it.

To put a new real run in the README (after the golden changed)::

    loadknee demo | tee /tmp/demo.txt
    python -m tests.support.demo_shape /tmp/demo.txt    # rewrites README.md's sample
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.support.paths import DATA, REPO

GOLDEN = DATA / "golden" / "demo_shape.txt"
README = REPO / "README.md"
#: the README's sample: the first code block after this line
SAMPLE_AFTER = "`loadknee demo` prints this"
#: progress lines the README keeps (then "...")
SAMPLE_PROGRESS = 2

PROGRESS = re.compile(r"^\[loadknee\] (baseline|stage \d|refine stage \d)")
#: the analysis's own progress (stderr), shown only when it is slow: not part of the shape
ANALYZE = re.compile(r"^\[analyze\] ")
ROW = re.compile(r"^\s*\d+(\s+\S+){5,}$")
#: lines whose rest is a result, not a shape: kept as their first words
RESULTS = ("DEPLOY:", "capacity ", "why:", "fix:", "[loadknee] sweep over:", "[demo] sweep:")
MASKS = (
    (re.compile(r"http://127\.0\.0\.1:(\d+|<port>)"), "<url>"),
    (re.compile(r"^run [\w.<>-]+: (?=\d)"), "run <run_id>: "),
    (re.compile(r"\S*runs/[\w.<>-]+"), "<run_dir>"),
    (re.compile(r"\d[\d,.]*"), "N"),
    (re.compile(r"-{2,}"), "--"),
    (re.compile(r"\s+"), " "),
)


def _masked(line: str) -> str:
    for pattern, mask in MASKS:
        line = pattern.sub(mask, line)
    return line.strip()


#: the warnings a demo may raise that are about the machine, not the demo's plan: a busy machine
#: (a CPU hog, a loaded CI box) makes the client late and overloads the server's shared CPU, and
#: the run then says so honestly
LATE_CLIENT = "warning: the load generator was late"
SHARED_HOST = "warning: the server shares this machine"
#: the table's legend for a stage too noisy to judge: a loaded machine's doing in the demo (fresh
#: #51: the 2-user stage at load 9.3 on 2 cores, the answer still DEPLOY 8)
NOISY_STAGE = "? stage too noisy or short to judge"
MACHINE_WARNINGS = (LATE_CLIENT, SHARED_HOST, NOISY_STAGE)


def without_machine_warnings(text: str) -> tuple[str, set[str]]:
    """``text`` less the machine's warnings (:data:`MACHINE_WARNINGS`) and their wrapped lines,
    and which of them it held."""
    kept: list[str] = []
    seen: set[str] = set()
    skipping = False
    for line in text.splitlines():
        warning = next((w for w in MACHINE_WARNINGS if line.startswith(w)), None)
        if warning is not None:
            seen.add(warning)
            skipping = True
            continue
        if skipping and line.startswith("  "):
            continue
        skipping = False
        kept.append(line)
    return "\n".join(kept) + ("\n" if text.endswith("\n") else ""), seen


def shape(text: str) -> list[str]:
    """The output's lines with everything that differs between two good runs masked."""
    out: list[str] = []
    in_result = False
    for line in text.splitlines():
        if PROGRESS.match(line) or ANALYZE.match(line) or line.strip() == "...":
            continue
        if in_result and line.startswith("  "):
            continue  # a result sentence wrapped: how many lines it takes is a result too
        result = next((r for r in RESULTS if line.startswith(r)), None)
        in_result = result is not None
        if result:
            item = f"{result.strip()} …"
        elif ROW.match(line):
            item = "<row>"
        else:
            item = _masked(line)
        if not (out and out[-1] == item == "<row>"):
            out.append(item)
    return out


def readme_sample(readme: str) -> str:
    """The README's sample output: the first code block after :data:`SAMPLE_AFTER`."""
    after = readme.split(SAMPLE_AFTER, 1)[1]
    return after.split("```\n", 2)[1]


def sample_from_run(output: str) -> str:
    """A real run's output as the README shows it: the first progress lines and "...", the port
    and the run id written as placeholders."""
    lines, progress = [], 0
    for line in output.splitlines():
        if PROGRESS.match(line):
            progress += 1
            if progress > SAMPLE_PROGRESS:
                if progress == SAMPLE_PROGRESS + 1:
                    lines.append("...")
                continue
        lines.append(line)
    text = "\n".join(lines) + "\n"
    text = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:<port>", text)
    return re.sub(r"runs/\d{8}-\d{6}(-\d+)?", "runs/<run_id>", text).replace(
        "run " + _run_id(output) + ":", "run <run_id>:"
    )


def _run_id(output: str) -> str:
    found = re.search(r"runs/(\d{8}-\d{6}(?:-\d+)?)", output)
    return found.group(1) if found else "<run_id>"


def write_readme(output: str, readme: Path = README) -> None:
    """Replace the README's sample with ``output`` (a real demo run's)."""
    text = readme.read_text(encoding="utf-8")
    old = readme_sample(text)
    head, tail = text.split(SAMPLE_AFTER, 1)
    readme.write_text(head + SAMPLE_AFTER + tail.replace(old, sample_from_run(output), 1))


if __name__ == "__main__":
    write_readme(Path(sys.argv[1]).read_text(encoding="utf-8"))
