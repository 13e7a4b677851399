"""Read one run directory into validated pandas frames (:class:`Run`), or fail with one clear error.

Validation is against :mod:`loadknee_core.contract`: every missing file, missing column, and
column whose cells are not of the contract's type is collected, and all of them are reported in a
single :class:`RunDirError` so a user fixes a broken directory in one pass. Optional files
(``gpu.csv``, ``server_metrics.csv``, ``client.csv``) may be absent: their frames are then empty
with the contract's columns. Numeric columns come back as float64 with NaN for empty cells (never
0); text columns as ``object``/``str``.

Speed: the common case (a valid file) is one ``pandas.read_csv`` call with dtype hints per file,
using the pyarrow engine when it is installed and the C engine otherwise. Only when that fast
read fails is the file re-read as text to find which columns are bad.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from loadknee_core import contract

#: Columns read as text; every other contract column is numeric (float64, NaN when empty).
TEXT_COLUMNS: dict[str, frozenset[str]] = {
    contract.STAGES_CSV: frozenset({"kind", "stop_reason"}),
    contract.REQUESTS_CSV: frozenset(
        {
            "request_id",
            "phase",
            "worker",
            "user_id",
            "endpoint",
            "usage_source",
            "outcome",
            "error",
            "prompt_hash",
            "conversation_id",
            "traffic_class",
        }
    ),
    contract.GPU_CSV: frozenset({"source", "error"}),
    contract.SERVER_METRICS_CSV: frozenset({"endpoint", "metric", "labels", "error"}),
    contract.CLIENT_CSV: frozenset({"worker"}),
}

#: Closed vocabularies checked on load: (file, column) → allowed values (empty cells allowed).
VOCABULARIES: dict[tuple[str, str], tuple[str, ...]] = {
    (contract.STAGES_CSV, "kind"): contract.STAGE_KINDS,
    (contract.REQUESTS_CSV, "phase"): contract.PHASES,
}

OPTIONAL_FILES = (contract.GPU_CSV, contract.SERVER_METRICS_CSV, contract.CLIENT_CSV)


class RunDirError(ValueError):
    """A run directory that does not follow the contract; ``problems`` lists every defect."""

    def __init__(self, run_dir: Path, problems: Iterable[str]) -> None:
        self.run_dir = run_dir
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{run_dir} is not a valid loadknee run directory:\n{lines}")


@dataclass(frozen=True, eq=False)
class Run:
    """One run directory, read and validated. Frames carry at least the contract's columns."""

    path: Path
    run_info: dict[str, Any]
    stages: pd.DataFrame
    requests: pd.DataFrame
    gpu: pd.DataFrame
    server_metrics: pd.DataFrame
    client: pd.DataFrame
    notes: tuple[str, ...] = field(default=())  # e.g. "merged 3 per-worker request files"
    #: files whose last line was cut mid-row and dropped (a killed writer, a copy in progress)
    cut_files: tuple[str, ...] = field(default=())


def empty_frame(name: str) -> pd.DataFrame:
    """An empty frame with the contract's columns and dtypes for file ``name``."""
    text = TEXT_COLUMNS[name]
    return pd.DataFrame(
        {c: pd.Series(dtype=object if c in text else "float64") for c in contract.CSV_COLUMNS[name]}
    )


def _engine() -> Literal["c", "pyarrow"]:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return "c"
    return "pyarrow"


def _dtypes(name: str, header: Iterable[str]) -> dict[str, Any]:
    text = TEXT_COLUMNS[name]
    known = set(contract.CSV_COLUMNS[name])
    return {c: (object if (c in text or c not in known) else "float64") for c in header}


def _header(path: Path) -> list[str]:
    return [str(c) for c in pd.read_csv(path, nrows=0).columns]


#: an integer column within this magnitude holds exactly the floats a float64 read gives
EXACT_INT = 2**53


def _exact_float(column: pd.Series) -> bool:
    """``column`` (read by inference) cast to float64 is what reading it as float64 gives."""
    if column.dtype == "float64":
        return True
    if column.dtype != "int64":  # a bad cell (text), True/False, a huge integer: not sure
        return False
    values = column.to_numpy()
    return len(values) == 0 or bool(values.min() >= -EXACT_INT and values.max() <= EXACT_INT)


def _typed_read(source: Path | io.BytesIO, dtypes: dict[str, Any]) -> pd.DataFrame:
    """``pandas.read_csv`` with ``dtypes``, faster: the text columns are named, the numeric ones
    read by pandas' own inference and cast to float64 after. Parsing integers as floats cost a
    200k-request read ~20 % more than parsing them as integers (issue 43), and an integer within
    :data:`EXACT_INT` is the same float either way (a bare ``-0`` aside, which no writer
    writes). Anything inference gives that is not float64 or such an integer (a bad cell, an
    empty file) is read again with every type named, as before, so a defect is found and told
    the same way."""
    text = {c: t for c, t in dtypes.items() if t is object}
    numeric = [c for c, t in dtypes.items() if t == "float64"]
    frame = pd.read_csv(source, dtype=text, engine=_engine())
    if all(_exact_float(frame[c]) for c in numeric):
        for c in numeric:
            if frame[c].dtype != "float64":
                frame[c] = frame[c].astype("float64")
        return frame
    if isinstance(source, io.BytesIO):
        source.seek(0)
    return pd.read_csv(source, dtype=dtypes, engine=_engine())


def _bad_numeric(source: Path | io.BytesIO, file_name: str, columns: Iterable[str]) -> list[str]:
    """Slow path: re-read as text and name each numeric column holding non-numeric cells."""
    raw = pd.read_csv(source, dtype=str, keep_default_na=False)
    problems = []
    for col in columns:
        if col not in raw.columns:
            continue
        cells = raw[col].str.strip()
        nonempty = cells[cells != ""]
        parsed = pd.to_numeric(nonempty, errors="coerce")
        bad = nonempty[parsed.isna()]
        if len(bad):
            rows = ", ".join(str(i + 2) for i in bad.index[:3])
            problems.append(
                f"{file_name}: column {col!r} must be numeric; {len(bad)} cell(s) are not "
                f"(e.g. {bad.iloc[0]!r} on line {rows})"
            )
    return problems


def _complete_part(path: Path) -> bytes | None:
    """The file up to its last newline when its last line was cut by a killed writer, else None.

    Writers flush whole rows at least once a second, but SIGKILL can land in the middle of a
    buffered write; that partial row is dropped (and noted) rather than failing the whole run or
    counting as a request with an empty outcome.
    """
    with path.open("rb") as f:
        f.seek(0, io.SEEK_END)
        if f.tell() == 0:
            return None
        f.seek(-1, io.SEEK_END)
        if f.read(1) == b"\n":
            return None
        f.seek(0)
        data = f.read()
    return data[: data.rfind(b"\n") + 1]


def _read_csv(
    path: Path,
    name: str,
    problems: list[str],
    notes: list[str] | None = None,
    cut: list[str] | None = None,
) -> pd.DataFrame | None:
    """Read one contract CSV; append its defects to ``problems`` and return None if any
    (``cut`` gets the file's name when its partial last line was dropped)."""
    complete = _complete_part(path)
    source: Path | io.BytesIO = path if complete is None else io.BytesIO(complete)
    if complete is not None and notes is not None:
        notes.append(f"{path.name}: dropped a partial last line (the writer was killed mid-row)")
    if complete is not None and cut is not None:
        cut.append(path.name)
    try:
        header = _header(path)
    except (pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        problems.append(f"{path.name}: unreadable or empty ({exc})")
        return None
    added = contract.ADDED_COLUMNS.get(name, frozenset())
    missing = [c for c in contract.CSV_COLUMNS[name] if c not in header and c not in added]
    if missing:
        problems.append(f"{path.name}: missing column(s) {', '.join(missing)}")
        return None
    dtypes = _dtypes(name, header)
    try:
        frame = _typed_read(source, dtypes)
    except pd.errors.ParserError as exc:  # e.g. a quoted field cut by a killed writer
        problems.append(f"{path.name}: could not be parsed as CSV ({exc})")
        return None
    except (ValueError, TypeError):
        numeric = [c for c, t in dtypes.items() if t == "float64"]
        if isinstance(source, io.BytesIO):
            source.seek(0)
        found = _bad_numeric(source, path.name, numeric)
        problems.extend(found or [f"{path.name}: could not be parsed as CSV"])
        return None
    for (file_name, col), allowed in VOCABULARIES.items():
        if file_name != name:
            continue
        values = frame[col]
        bad = values[~values.isin(allowed) & values.notna()]
        if len(bad):
            problems.append(
                f"{path.name}: column {col!r} has value(s) outside {list(allowed)}: "
                f"{sorted(set(bad.astype(str)))[:5]}"
            )
    for col in added:
        if col not in frame.columns:  # a file from before the column: empty, not a defect
            frame[col] = float("nan") if col not in TEXT_COLUMNS[name] else None
    return frame


def _read_requests(
    run_dir: Path, problems: list[str], notes: list[str], cut: list[str] | None = None
) -> pd.DataFrame | None:
    paths = sorted(run_dir.glob("requests.*.csv"))
    merged = run_dir / contract.REQUESTS_CSV
    if merged.exists():
        paths.insert(0, merged)
    if not paths:
        problems.append(f"missing file {contract.REQUESTS_CSV} (nor any requests.*.csv)")
        return None
    frames = [_read_csv(p, contract.REQUESTS_CSV, problems, notes, cut) for p in paths]
    good = [f for f in frames if f is not None]
    if len(good) != len(frames):
        return None
    if len(good) == 1:
        return good[0]
    notes.append(f"merged {len(good)} request files: {', '.join(p.name for p in paths)}")
    both = pd.concat(good, ignore_index=True)
    # a merged requests.csv next to the per-worker files it was made from: keep one copy
    return both.drop_duplicates(subset="request_id", keep="first", ignore_index=True)


def _read_run_json(run_dir: Path, problems: list[str]) -> dict[str, Any]:
    path = run_dir / contract.RUN_JSON
    if not path.exists():
        return {}
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{contract.RUN_JSON}: not valid JSON ({exc})")
        return {}
    if not isinstance(info, dict):
        problems.append(f"{contract.RUN_JSON}: must hold one JSON object")
        return {}
    return info


def read_run(
    run_dir: str | Path,
    *,
    nvidia_smi_csv: str | Path | None = None,
    read_nvidia_smi: Callable[[Path], pd.DataFrame] | None = None,
) -> Run:
    """Read and validate ``run_dir``; raise :class:`RunDirError` listing every defect found.

    ``nvidia_smi_csv`` is a file written by ``nvidia-smi --query-gpu=... -lms 500`` alongside the
    run; its samples are appended to the gpu frame (``read_nvidia_smi`` overrides the
    parser, which defaults to :func:`analysis.inputs.nvsmi.read_nvidia_smi_csv`).
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise RunDirError(root, [f"no such directory: {root}"])
    problems: list[str] = []
    notes: list[str] = []
    cut: list[str] = []
    run_info = _read_run_json(root, problems)
    stages_path = root / contract.STAGES_CSV
    stages = None
    if stages_path.exists():
        stages = _read_csv(stages_path, contract.STAGES_CSV, problems, notes, cut)
    else:
        problems.append(f"missing file {contract.STAGES_CSV}")
    requests = _read_requests(root, problems, notes, cut)
    optional: dict[str, pd.DataFrame | None] = {}
    for name in OPTIONAL_FILES:
        path = root / name
        optional[name] = (
            _read_csv(path, name, problems, notes) if path.exists() else empty_frame(name)
        )
    gpu = optional[contract.GPU_CSV]
    if nvidia_smi_csv is not None and gpu is not None:
        parse = read_nvidia_smi or _default_nvsmi_reader()
        try:
            extra = parse(Path(nvidia_smi_csv))
        except (OSError, ValueError) as exc:
            problems.append(f"nvidia-smi file {nvidia_smi_csv}: {exc}")
        else:
            gpu = pd.concat([gpu, extra], ignore_index=True) if len(gpu) else extra
            notes.append(f"merged {len(extra)} nvidia-smi samples from {nvidia_smi_csv}")
    if problems or stages is None or requests is None or gpu is None:
        raise RunDirError(root, problems)
    server_metrics, client = optional[contract.SERVER_METRICS_CSV], optional[contract.CLIENT_CSV]
    assert server_metrics is not None and client is not None  # problems would be non-empty
    return Run(
        path=root,
        run_info=run_info,
        stages=stages.sort_values("stage", ignore_index=True),
        requests=requests,
        gpu=gpu,
        server_metrics=server_metrics,
        client=client,
        notes=tuple(notes),
        cut_files=tuple(cut),
    )


def _default_nvsmi_reader() -> Callable[[Path], pd.DataFrame]:
    from analysis.inputs.nvsmi import (
        read_nvidia_smi_csv,  # helper D's parser; imported only when used
    )

    return read_nvidia_smi_csv
