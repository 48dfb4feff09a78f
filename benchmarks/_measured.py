"""Shared by validate_measured.py and fit_kernel_model.py: read the Vidur profiling data and build each measured
kernel's shape from the model columns (plain numbers; graphroof.timing prices them).

Data: ``../shared/data/measured/`` (Vidur profiling data, microsoft/vidur, MIT licence; see its README.md).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from graphroof.validate.refit import OPS_COLUMNS, Kernel, OpsRow, kernels_of, ops_row  # noqa: F401 (re-exported)

GPU_PROFILE = {"a100": "a100-80gb-sxm", "h100": "h100-sxm"}


def data_dir() -> Path:
    env = os.environ.get("GRAPHROOF_MEASURED_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    for cand in (here.parent / "shared" / "data" / "measured", here / ".." / "shared" / "data" / "measured"):
        if cand.is_dir():
            return cand
    return here.parent / "shared" / "data" / "measured"


def load_ops(directory: Path | None = None) -> list[OpsRow]:
    directory = directory or data_dir()
    rows = []
    for path in sorted(directory.glob("vidur_*_Llama-2-*_ops.csv")):
        gpu, model = path.stem.split("_")[1], path.stem.split("_")[2]
        model = model.removeprefix("Llama-2-").removesuffix("-hf")
        with path.open(newline="") as f:
            rows.extend(x for r in csv.DictReader(f) if (x := ops_row(gpu, model, r)) is not None)
    return rows


@dataclass(frozen=True)
class AllReduceRow:
    gpu: str
    n_gpus: int
    gpus_per_node: int
    size_bytes: int
    measured_s: float


def load_allreduce(directory: Path | None = None) -> list[AllReduceRow]:
    directory = directory or data_dir()
    rows = []
    for path in sorted(directory.glob("vidur_*_dgx_all_reduce.csv")):
        gpu = path.stem.split("_")[1]
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                rows.append(AllReduceRow(gpu, int(r["num_workers"]), int(r["devices_per_node"]), int(r["size_bytes"]),
                                         float(r["all_reduce_ms"]) * 1e-3))
    return rows
