"""Trim the tools' raw outputs into the committed fixtures (numbers kept, text shortened).

Usage: python trim.py RAW_DIR OUT_DIR. Every number and every record is kept; strings longer than
40 characters (prompts in request_args, generated text) are cut to 40, generated_texts emptied,
and GuideLLM's api_key set to null. AIPerf's inputs.json (the prompts) is not copied.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any


def shorten(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (None if k == "api_key" else shorten(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [shorten(v) for v in value]
    if isinstance(value, str) and len(value) > 40:
        return value[:40]
    return value


def main(raw: Path, out: Path) -> None:
    (out / "guidellm").mkdir(parents=True, exist_ok=True)
    data = json.loads((raw / "guidellm/benchmarks.json").read_text())
    (out / "guidellm/benchmarks.json").write_text(json.dumps(shorten(data), separators=(",", ":")))
    for folder in sorted((raw / "aiperf").glob("concurrency*")):
        dest = out / "aiperf" / folder.name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "profile_export.jsonl", dest)
        summary = json.loads((folder / "profile_export_aiperf.json").read_text())
        (dest / "profile_export_aiperf.json").write_text(json.dumps(shorten(summary), indent=1))
    (out / "vllm-bench").mkdir(parents=True, exist_ok=True)
    for path in sorted((raw / "vllm").glob("vllm-c*.json")):
        data = json.loads(path.read_text())
        data["generated_texts"] = ["" for _ in data.get("generated_texts", [])]
        (out / "vllm-bench" / path.name).write_text(json.dumps(shorten(data)))
    (out / "loadknee").mkdir(parents=True, exist_ok=True)
    for name in ("run.json", "stages.csv", "requests.csv"):
        shutil.copy(raw / "loadknee" / name, out / "loadknee" / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
