"""loadknee's default sweep against GuideLLM's ``knee`` profile: answer, distance, wall time.

For each capacity (``--max-num-seqs``, default 8, 12, 20) a fresh ``loadknee sim --no-metrics``
(``fast`` preset: both tools see only their own client-side timings) serves, one after the other:

* **loadknee**: ``loadknee run`` with its defaults (grid, refinement, early stop) except the
  stage length, then ``loadknee analyze``; the answer is ``knee.json``'s ``max_concurrency``;
* **GuideLLM 0.8.1**: ``guidellm run --profile kind=knee`` (initial streams 1, 2, 4, 8, 16, 24, 32,
  ``adaptive: true``: one extra pass around its first estimate), each point held
  ``--stage-seconds`` (``max_duration`` constraint); the answer is its final analysis's
  ``throughput.knee`` (a fractional stream count).

Both send 128 prompt tokens and ask for 64 output tokens (GuideLLM's ``synthetic_text`` data,
which sets ``ignore_eos``); the truth is the simulator's saturation concurrency
(:func:`loadknee_locust.sim.saturation.saturation_concurrency`). Wall time is the whole command
from start to answer: for loadknee ``run`` + ``analyze``, for GuideLLM its one ``run`` (its start,
a few seconds importing torch and transformers, included).

GuideLLM is installed once into its own venv under ``~/.cache/loadknee/guidellm-0.8.1`` (pip,
from the package registry; reused when present). It needs a tokenizer to size its prompts and
must not reach the Hugging Face hub: the benchmark writes a tiny word-level tokenizer
(``tokenizers``' ``WordLevel`` model: the simulator's own word list, one token per word or
punctuation mark, unknown words read as the word ``unk``) to a folder and passes it as the
``huggingface_auto`` tokenizer's ``model``, with ``HF_HUB_OFFLINE=1``. Its decoded prompts are
words the simulator counts one token each, so both tools send the same lengths.

    .venv/bin/python benchmarks/bench_vs_guidellm.py [--slots 8,12,20] [--stage-seconds 12]
        [--only loadknee|guidellm]

Loadknee's warm-up and cooldown keep the defaults' proportions to the stage (30 s and 10 s of
120 s: ``--warmup-seconds`` 3, ``--cooldown-seconds`` 1 at 12 s); its 20-request single-user
baseline is run as by default. Target (issue 27): loadknee within 15 % below the truth and never
above for each capacity, in less wall time than GuideLLM on the same server and stage length.

Measured (2 shared cores, load average 8-15 from other jobs, 12 s stages, one run each). Before
issue 27's refinement (fixed bisection):

    slots  loadknee: answer / wall s / levels          guidellm knee: answer / wall s / points
        8  8 (exact) / 134.7 / 1,2,4,8,16,12,10,9      7.8 (-2 %)  / 333.1 / 16
       12  12 (exact) / 136.3 / 1,2,4,8,16,12,14,13    10.3 (-15 %) / 434.9 / 14
       20  20 (exact) / 134.2 / 8 levels               15.9 (-20 %) / 569.4 / 15

With refine levels chosen by the fit's interval, one side-by-side run (the build before the
interval waited for a refine stage to pick levels too):

    slots  loadknee: answer / wall s / levels          guidellm knee: answer / wall s / points
        8  8 (exact) / 113.3 / 1,2,4,8,16,12          7.9 (-1 %)  / 563.4 / 16
       12  12 (exact) / 110.5 / 1,2,4,8,16,12         11.4 (-5 %)  / 490.4 / 14
       20  17 (-15 %) / 119.1 / 1,2,4,8,16,24,17      15.9 (-20 %) / 297.3 / 15

Ratios of wall time loadknee / GuideLLM: 0.20, 0.23, 0.40. On 20 slots that build aimed its first
refine stage at 17 from the interval the fit extrapolated between 16 and 24 and stopped there;
the interval now picks levels only after a refine stage. That build, loadknee only, the same
day: 20 slots 20 (exact) in 133.3 s over 1,2,4,8,16,24,20,22; 8 slots 8 (exact) in 106.0 s over
1,2,4,8,16,12 (12 slots: the first refine stage is 12 either way). GuideLLM's knee is a
fractional stream count; it was above the truth nowhere here and 15-20 % below on 12 and 20 slots
in the first run. Its time per point includes a statistics pass after each point, and its start
(torch, transformers) once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import saturation_concurrency
from loadknee_locust.sim.tokenizer import VOCAB

GUIDELLM_VERSION = "0.8.1"
CACHE = Path(os.environ.get("LOADKNEE_CACHE", Path.home() / ".cache" / "loadknee"))
INPUT_TOKENS, OUTPUT_TOKENS = 128, 64  # loadknee run's defaults
GUIDELLM_STREAMS = [1, 2, 4, 8, 16, 24, 32]  # the knee profile's initial pass (issue 27)

#: run by the GuideLLM venv's python: writes a WordLevel tokenizer that transformers can load
TOKENIZER_SCRIPT = """
import json, sys
from pathlib import Path
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
out, words = Path(sys.argv[1]), sys.argv[2:]
vocab = {"unk": 0}
for word in words:
    vocab.setdefault(word, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="unk"))
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.WhitespaceSplit(),
    pre_tokenizers.Split(Regex(r"\\w+|[^\\w\\s]"), behavior="isolated"),
])
tok.decoder = decoders.WordPiece(prefix="##")
out.mkdir(parents=True, exist_ok=True)
tok.save(str(out / "tokenizer.json"))
config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "unk",
          "model_max_length": 1000000}
(out / "tokenizer_config.json").write_text(json.dumps(config))
"""


def guidellm_venv() -> Path:
    """The venv with GuideLLM installed (created on first use); its ``bin`` folder."""
    venv = CACHE / f"guidellm-{GUIDELLM_VERSION}"
    exe = venv / "bin" / "guidellm"
    if not exe.exists():
        print(f"installing guidellm=={GUIDELLM_VERSION} into {venv} (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", f"guidellm=={GUIDELLM_VERSION}"],
            check=True,
        )
    return venv / "bin"


def word_tokenizer(bin_dir: Path, folder: Path) -> Path:
    """A local word-level tokenizer folder (no hub): the simulator's words."""
    words = sorted({w.strip() for w in VOCAB})
    subprocess.run(
        [str(bin_dir / "python"), "-c", TOKENIZER_SCRIPT, str(folder), *words], check=True
    )
    return folder


def run_loadknee(
    url: str, stage_s: float, out: Path, run_id: str
) -> tuple[float, int | None, list[int]]:
    """(wall seconds, max_concurrency, levels run) of one default ``loadknee run`` + analyze."""
    timing = ["--stage-seconds", f"{stage_s:g}", "--warmup-seconds", f"{stage_s / 4:g}",
              "--cooldown-seconds", f"{stage_s / 12:g}"]  # fmt: skip
    run_dir = out / run_id
    loadknee = [sys.executable, "-m", "loadknee_locust"]
    commands = [
        [*loadknee, "run", "--host", url, *timing, "--out", str(out), "--run-id", run_id],
        [*loadknee, "analyze", str(run_dir)],
    ]
    t0 = time.monotonic()
    for command in commands:
        subprocess.run(command, check=True, capture_output=True, timeout=3600)
    wall = time.monotonic() - t0
    knee = json.loads((run_dir / "report" / "knee.json").read_text())["knee"]
    rows = (run_dir / "stages.csv").read_text().strip().splitlines()
    kind, users = (rows[0].split(",").index(name) for name in ("kind", "target_users"))
    levels = [int(r.split(",")[users]) for r in rows[1:] if r.split(",")[kind] != "baseline"]
    return wall, knee["max_concurrency"], levels


def run_guidellm(
    bin_dir: Path, tokenizer: Path, url: str, stage_s: float, out: Path
) -> tuple[float, float | None, list[int]]:
    """(wall seconds, knee streams, streams run) of one ``guidellm run --profile kind=knee``."""
    report = out / "guidellm.json"
    profile = {"kind": "knee", "initial_streams": GUIDELLM_STREAMS, "adaptive": True}
    command = [
        str(bin_dir / "guidellm"), "run",
        "--backend", json.dumps({"kind": "openai_http", "target": url}),
        "--profile", json.dumps(profile),
        "--constraint", json.dumps({"kind": "max_duration", "seconds": stage_s}),
        "--tokenizer", json.dumps({"kind": "huggingface_auto", "model": str(tokenizer)}),
        "--data", json.dumps({"kind": "synthetic_text", "prompt_tokens": INPUT_TOKENS,
                              "output_tokens": OUTPUT_TOKENS}),
        "--output", json.dumps({"kind": "json", "path": str(report)}),
        "--disable-console-interactive",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t0 = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, env=env)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"guidellm failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    data = json.loads(report.read_text())
    knee = None
    for conclusion in data.get("conclusions") or ():
        if conclusion.get("kind") == "knee_detection":
            knee = conclusion["final"]["throughput"].get("knee")
    streams = [int(b["config"]["strategy"]["streams"]) for b in data.get("benchmarks") or ()]
    return wall, knee, streams


def distance(got: float | None, truth: float) -> str:
    return "n/a" if got is None else f"{(got - truth) / truth * 100:+.0f} %"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", default="8,12,20", help="sim --max-num-seqs values")
    ap.add_argument("--stage-seconds", type=float, default=12.0, help="both tools, per level")
    ap.add_argument("--only", choices=["loadknee", "guidellm"], help="run one tool only")
    args = ap.parse_args()
    tools = [args.only] if args.only else ["loadknee", "guidellm"]
    bin_dir = guidellm_venv() if "guidellm" in tools else None
    print(f"stage {args.stage_seconds:g} s; simulator fast preset, /metrics hidden", flush=True)
    print(f"{'slots':>5} {'truth':>5} {'tool':>9} {'answer':>7} {'distance':>8} "
          f"{'wall s':>7} {'stages':>6}  levels run (loadknee: + a 1-user baseline)",
          flush=True)  # fmt: skip
    walls: dict[tuple[int, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tok = word_tokenizer(bin_dir, Path(tmp) / "tokenizer") if bin_dir else None
        for slots in (int(s) for s in args.slots.split(",")):
            truth = saturation_concurrency(
                preset("fast", max_num_seqs=slots), INPUT_TOKENS, OUTPUT_TOKENS
            )
            for tool in tools:
                out = Path(tmp) / f"{tool}-{slots}"
                out.mkdir()
                got: float | None
                with SimProcess.start("fast", max_num_seqs=slots, metrics=False) as sim:
                    if tool == "loadknee":
                        wall, got, n = run_loadknee(sim.url, args.stage_seconds, out, "run")
                        answer = "—" if got is None else f"{got:g}"
                    else:
                        assert bin_dir is not None and tok is not None
                        wall, got, n = run_guidellm(bin_dir, tok, sim.url, args.stage_seconds, out)
                        answer = "—" if got is None else f"{got:.1f}"
                walls[(slots, tool)] = wall
                print(f"{slots:>5} {truth:>5g} {tool:>9} {answer:>7} {distance(got, truth):>8} "
                      f"{wall:>7.1f} {len(n):>6}  {','.join(map(str, n))}",
                      flush=True)  # fmt: skip
            if len(tools) == 2:
                ratio = walls[(slots, "loadknee")] / walls[(slots, "guidellm")]
                print(f"      wall time loadknee / guidellm: {ratio:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
