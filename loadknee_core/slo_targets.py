"""The user's latency targets (SLOs): parse ``--slo`` / ``--goodput`` / ``--slo-file`` / presets.

Two kinds of target, both on the per-request latencies a run directory holds (``requests.csv``):

* a **percentile limit per stage**, ``METRIC_pNN_ms=LIMIT`` (``ttft_p95_ms=500``,
  ``tpot_p95_ms=50``, ``e2e_p99_ms=8000``, ``itl_p95_ms=80``; ``s_per_1k_p95=4`` in seconds per
  1000 prompt+completion tokens): the stage meets it when that percentile of its served requests
  is at or under the limit;
* a **per-request threshold for goodput**, ``METRIC_ms=LIMIT``
  (``--goodput ttft_ms=500,tpot_ms=50``, as vLLM's ``--goodput``): a request is good when it
  was served and meets every threshold.

Metrics: ``ttft`` (time to first token), ``tpot`` (time per output token after the first),
``itl`` (a request's own P95 of the gaps between chunks, ``itl_p95_ms`` in requests.csv), ``e2e``
and ``s_per_1k`` (e2e seconds per 1000 total tokens). ``--sla-ms`` stays the knee's SLA signal and
also becomes one SLO, ``e2e_<tail>_ms``, so old command lines keep their meaning.

Presets (:data:`PRESETS`) name their source; the report always prints the limits used, so a
preset never hides its numbers.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: metric name → requests.csv column read per request
METRIC_COLUMNS: dict[str, str] = {
    "ttft": "ttft_ms",
    "tpot": "tpot_ms",
    "itl": "itl_p95_ms",
    "e2e": "e2e_ms",
    "s_per_1k": "s_per_1k",  # derived: e2e_ms / (prompt + completion tokens)
}
METRIC_LABELS: dict[str, str] = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "e2e",
    "s_per_1k": "s/1k tok",
}

_PERCENTILE = re.compile(
    r"^(ttft|tpot|itl|e2e)_p(\d{1,2}(?:\.\d+)?)_ms$|^(s_per_1k)_p(\d{1,2}(?:\.\d+)?)(?:_s)?$"
)
_THRESHOLD = re.compile(r"^(ttft|tpot|itl|e2e)_ms$|^(s_per_1k)(?:_s)?$")


@dataclass(frozen=True)
class Slo:
    """One percentile limit per stage, e.g. TTFT P95 ≤ 500 ms."""

    metric: str  # a key of METRIC_COLUMNS
    percentile: float  # 95.0
    limit: float  # ms (seconds per 1k tokens for s_per_1k)

    @property
    def key(self) -> str:
        pct = f"{self.percentile:g}"
        return f"s_per_1k_p{pct}" if self.metric == "s_per_1k" else f"{self.metric}_p{pct}_ms"

    @property
    def unit(self) -> str:
        return "s" if self.metric == "s_per_1k" else "ms"

    def text(self) -> str:
        return f"{METRIC_LABELS[self.metric]} P{self.percentile:g} ≤ {self.limit:g} {self.unit}"


@dataclass(frozen=True)
class Threshold:
    """One per-request goodput threshold, e.g. TTFT ≤ 500 ms."""

    metric: str
    limit: float

    @property
    def key(self) -> str:
        return "s_per_1k" if self.metric == "s_per_1k" else f"{self.metric}_ms"

    def text(self) -> str:
        unit = "s" if self.metric == "s_per_1k" else "ms"
        return f"{METRIC_LABELS[self.metric]} ≤ {self.limit:g} {unit}"


#: Named targets: (percentile SLOs, where the numbers come from)
PRESETS: dict[str, tuple[tuple[Slo, ...], str]] = {
    "mlperf-llama2-70b-server": (
        (Slo("ttft", 99.0, 2000.0), Slo("tpot", 99.0, 200.0)),
        "MLPerf Inference, Llama-2-70B server scenario: TTFT ≤ 2 s and TPOT ≤ 200 ms at P99",
    ),
    "mlperf-llama2-70b-interactive": (
        (Slo("ttft", 99.0, 450.0), Slo("tpot", 99.0, 40.0)),
        "MLPerf Inference, Llama-2-70B interactive scenario: TTFT ≤ 450 ms and TPOT ≤ 40 ms at P99",
    ),
    "interactive": (
        (Slo("ttft", 95.0, 500.0), Slo("tpot", 95.0, 50.0)),
        "a chat product: first token within half a second, ~20 tokens/s per user (P95)",
    ),
    "batch": (
        (Slo("ttft", 95.0, 10000.0), Slo("tpot", 95.0, 200.0)),
        "an offline batch job: loose first-token and ~5 tokens/s per user (P95)",
    ),
}


def parse_slo(text: str) -> Slo:
    """``"ttft_p95_ms=500"`` → ``Slo("ttft", 95.0, 500.0)`` (ValueError with the forms accepted)."""
    name, sep, value = text.partition("=")
    match = _PERCENTILE.match(name.strip())
    if not sep or match is None:
        raise ValueError(
            f"--slo {text!r}: write METRIC_pNN_ms=LIMIT with METRIC one of ttft, tpot, itl, e2e "
            "(e.g. ttft_p95_ms=500), or s_per_1k_pNN=SECONDS"
        )
    metric = match.group(1) or match.group(3)
    pct = float(match.group(2) or match.group(4))
    if not 0 < pct < 100:
        raise ValueError(f"--slo {text!r}: the percentile must be between 0 and 100")
    return Slo(metric, pct, _limit(text, value))


def parse_goodput(text: str) -> tuple[Threshold, ...]:
    """``"ttft_ms=500,tpot_ms=50"`` → thresholds (ValueError with the forms accepted)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        match = _THRESHOLD.match(name.strip())
        if not sep or match is None:
            raise ValueError(
                f"--goodput {part!r}: write METRIC_ms=LIMIT with METRIC one of ttft, tpot, itl, "
                "e2e (e.g. ttft_ms=500,tpot_ms=50), or s_per_1k=SECONDS"
            )
        out.append(Threshold(match.group(1) or match.group(2), _limit(part, value)))
    return tuple(out)


def _limit(text: str, value: str) -> float:
    try:
        limit = float(value)
    except ValueError:
        raise ValueError(f"{text!r}: the limit must be a number") from None
    if not limit > 0:
        raise ValueError(f"{text!r}: the limit must be above 0")
    return limit


def read_slo_file(path: str | Path) -> dict[str, Any]:
    """A YAML (``.yaml``/``.yml``) or TOML file with keys ``preset``, ``slo`` (a map like
    ``ttft_p95_ms: 500``), ``goodput`` (``ttft_ms: 500``) and ``goodput_min_pct``."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".toml":
        data: Any = tomllib.loads(text)
    else:
        import yaml  # only when a YAML file is given

        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"--slo-file {p}: expected a map of preset / slo / goodput keys")
    unknown = set(data) - {"preset", "slo", "goodput", "goodput_min_pct"}
    if unknown:
        raise ValueError(f"--slo-file {p}: unknown keys {sorted(unknown)}")
    return data


@dataclass(frozen=True)
class SloParams:
    """Every target of the SLO evaluation (empty = no SLO given; nothing is evaluated)."""

    slos: tuple[Slo, ...] = ()
    goodput: tuple[Threshold, ...] = ()
    goodput_min_pct: float = 95.0
    sources: tuple[str, ...] = field(default=())  # presets used, with their source, for the report

    @property
    def given(self) -> bool:
        return bool(self.slos or self.goodput)

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        """Add ``--slo``, ``--goodput``, ``--goodput-min-pct``, ``--slo-file``, ``--slo-preset``."""
        g = parser.add_argument_group(
            "SLO capacity and goodput",
            "the highest concurrency meeting your latency targets, beside the knee",
        )
        g.add_argument(
            "--slo",
            dest="slo_slos",
            action="append",
            default=[],
            metavar="METRIC_pNN_ms=LIMIT[,...]",
            help="percentile limits per stage, comma separated or repeated (the same form as "
            "loadknee run --slo): ttft_p95_ms=500, tpot_p95_ms=50, itl_p95_ms=80, "
            "e2e_p99_ms=8000, s_per_1k_p95=4 (seconds per 1k tokens)",
        )
        g.add_argument(
            "--goodput",
            dest="slo_goodput",
            action="append",
            default=[],
            metavar="METRIC_ms=LIMIT,...",
            help="per-request thresholds: a request is good when it meets all of them "
            "(ttft_ms=500,tpot_ms=50; also itl_ms, e2e_ms, s_per_1k)",
        )
        g.add_argument(
            "--goodput-min-pct",
            dest="slo_goodput_min_pct",
            type=float,
            default=None,
            help="with --goodput, the %% of good requests a stage needs to count (default 95)",
        )
        g.add_argument(
            "--slo-file",
            dest="slo_file",
            metavar="FILE",
            help="a YAML or TOML file with preset, slo (ttft_p95_ms: 500 ...), goodput "
            "(ttft_ms: 500 ...) and goodput_min_pct; command-line values are added to it",
        )
        g.add_argument(
            "--slo-preset",
            dest="slo_preset",
            choices=sorted(PRESETS),
            help="named targets: "
            + "; ".join(
                f"{name} = {', '.join(s.text() for s in slos)} ({src})"
                for name, (slos, src) in PRESETS.items()
            ),
        )

    @classmethod
    def from_cli_args(
        cls, ns: argparse.Namespace, *, sla_ms: float | None = None, tail: str = "p95"
    ) -> SloParams:
        """Build from a namespace filled by :meth:`add_cli_args`; ``sla_ms`` (``--sla-ms``)
        becomes the SLO ``e2e_<tail>_ms``. Raises ValueError on a malformed target."""
        data: dict[str, Any] = read_slo_file(ns.slo_file) if getattr(ns, "slo_file", None) else {}
        presets = [p for p in (data.get("preset"), getattr(ns, "slo_preset", None)) if p]
        slos: list[Slo] = []
        sources = []
        for name in presets:
            if name not in PRESETS:
                raise ValueError(f"unknown SLO preset {name!r}: one of {', '.join(PRESETS)}")
            slos += PRESETS[name][0]
            sources.append(f"{name}: {PRESETS[name][1]}")
        slos += [parse_slo(f"{k}={v}") for k, v in (data.get("slo") or {}).items()]
        slos += [s for text in getattr(ns, "slo_slos", None) or [] for s in parse_slo_list(text)]
        if sla_ms is not None:
            slos.append(Slo("e2e", float(tail.lstrip("p")), float(sla_ms)))
        goodput: list[Threshold] = []
        file_goodput = data.get("goodput") or {}
        if file_goodput:
            goodput += parse_goodput(",".join(f"{k}={v}" for k, v in file_goodput.items()))
        for text in getattr(ns, "slo_goodput", None) or []:
            goodput += parse_goodput(text)
        min_pct = getattr(ns, "slo_goodput_min_pct", None)
        if min_pct is None:
            min_pct = data.get("goodput_min_pct", 95.0)
        if not 0 <= float(min_pct) <= 100:
            raise ValueError("--goodput-min-pct must be between 0 and 100")
        # a later target on the same metric and percentile replaces the earlier one
        by_key = {s.key: s for s in slos}
        by_metric = {t.key: t for t in goodput}
        return cls(
            slos=tuple(by_key.values()),
            goodput=tuple(by_metric.values()),
            goodput_min_pct=float(min_pct),
            sources=tuple(sources),
        )


#: where run.json keeps the SLOs given to the sweep (``loadknee run --slo``, ``--llm-slo``)
RUN_SLO_PARAMETER = "llm_slo"


def parse_slo_list(text: str) -> tuple[Slo, ...]:
    """``"ttft_p95_ms=500,tpot_p95_ms=50"`` (one target, or several comma separated: the form of
    ``loadknee run --slo`` and ``loadknee analyze --slo``) → the SLOs (ValueError)."""
    return tuple(parse_slo(part.strip()) for part in text.split(",") if part.strip())


def run_slo_params(run_info: dict[str, Any]) -> SloParams:
    """The SLOs the sweep was given, from ``run.json`` (empty when none, or when the recorded
    text does not parse: the sweep's own check refuses such a value before any load).

    Why the run directory carries them: the live judge refines around the SLO boundary while the
    sweep runs, and ``loadknee analyze`` on the run reports the same SLO capacity without the
    user typing the targets a second time.
    """
    parameters = run_info.get("parameters")
    text = parameters.get(RUN_SLO_PARAMETER) if isinstance(parameters, dict) else None
    if not isinstance(text, str) or not text.strip():
        return SloParams()
    try:
        slos = parse_slo_list(text)
    except ValueError:
        return SloParams()
    return SloParams(slos=tuple({s.key: s for s in slos}.values()))
