"""Every torchvision model (and a timm sample) through graphroof, against the weights' published figures.

For each model: graphroof's GMACs (matrix FLOPs / 2) against the weights' ``_ops`` metadata (torchvision's
GFLOPS column, which counts multiply-adds), the parameters the model holds against ``num_params``, the weight
bytes graphroof counts per parameter (4 for fp32, 1 for int8: above that a weight is counted more than once),
the capture that ran and the time; then a summary per class (median and worst GMACs error, failures by
exception class).  torchvision and timm are optional: this script is not part of the test suite.

    PYTHONPATH=. python benchmarks/torchvision_models.py                 # everything
    PYTHONPATH=. python benchmarks/torchvision_models.py --only 'resnet|rcnn' --capture dispatch
    PYTHONPATH=. python benchmarks/torchvision_models.py --timm 40 --json out.json

Inputs: classification and quantized models ``[1, 3, crop, crop]`` (crop from the weights' transforms);
segmentation ``[1, 3, 520, 520]``; detection one ``[3, 800, 800]`` image; video ``[1, 3, 16, crop, crop]``;
optical flow two ``[1, 3, 520, 960]`` frames.  Models are built on the meta device (no weights); builders that
need real tensors (RegNet, the quantized models) fall back to the CPU, as ``graphroof analyze`` does.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
import time
import warnings
from typing import Any


def _torchvision_jobs() -> list[dict[str, Any]]:
    import torch
    import torchvision.models as M
    from torchvision.models import get_model, get_model_weights, list_models

    jobs = []
    for cls, mod in (("classification", M), ("detection", M.detection), ("segmentation", M.segmentation),
                     ("video", M.video), ("optical_flow", M.optical_flow), ("quantized", M.quantization)):
        for name in list_models(module=mod):
            try:
                w = get_model_weights(name).DEFAULT
            except Exception:  # noqa: BLE001 - a model without published weights
                w = None
            meta = dict(w.meta) if w is not None else {}
            crop = None
            try:
                crop = getattr(w.transforms(), "crop_size", None) if w is not None else None
            except Exception:  # noqa: BLE001
                pass
            side = int(crop[0]) if crop else 224
            kwargs: dict[str, Any] = {"weights": None}
            if cls == "classification" or cls == "quantized":
                inputs: Any = [(1, 3, side, side)]
                if name.startswith("vit_") and side != 224:  # the SWAG weights' resolution
                    kwargs["image_size"] = side
                if "googlenet" in name:  # published without the training-only aux heads (inception_v3 with)
                    kwargs["aux_logits"] = False
                    kwargs["init_weights"] = False
            elif cls == "segmentation":
                inputs = [(1, 3, 520, 520)]
                kwargs["weights_backbone"] = None
                if not name.startswith("lraspp"):  # the published weights (and num_params) have the aux head
                    kwargs["aux_loss"] = True
            elif cls == "detection":
                inputs = [[torch.empty(3, 800, 800, device="meta")]]
                kwargs["weights_backbone"] = None
            elif cls == "video":
                inputs = [(1, 3, 16, side, side)]
            else:
                inputs = [(1, 3, 520, 960), (1, 3, 520, 960)]
            if cls == "quantized":
                kwargs["quantize"] = True
            jobs.append({"name": name, "class": cls, "factory": functools.partial(get_model, name, **kwargs),
                         "inputs": inputs, "ops_g": meta.get("_ops"), "num_params": meta.get("num_params")})
    return jobs


def _timm_jobs(n: int) -> list[dict[str, Any]]:
    try:
        import timm
    except ModuleNotFoundError:
        return []
    by_family: dict[str, str] = {}
    for name in timm.list_models():
        fam = timm.models.get_pretrained_cfg(name) and timm.models._registry.get_arch_name(name)
        mod = timm.models._registry._model_to_module.get(name, fam)
        by_family.setdefault(mod, name)
    names = sorted(by_family.values())[:n]
    return [{"name": f"timm/{nm}", "class": "timm", "factory": functools.partial(timm.create_model, nm),
             "inputs": [(1, 3, 224, 224)], "ops_g": None, "num_params": None} for nm in names]


def run_one(job: dict[str, Any], capture: str, hw: str) -> dict[str, Any]:
    import graphroof
    import graphroof.counters.rules.quantized_torch  # noqa: F401 - until counters/rules/__init__ imports it
    from graphroof.frontends.torch_export import load_factory

    row: dict[str, Any] = {"name": job["name"], "class": job["class"], "ops_g": job["ops_g"],
                           "num_params": job["num_params"]}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = load_factory(job["factory"], job["inputs"], capture=capture, name=job["name"])
            a = graphroof.analyze(g, hw=hw)
    except Exception as e:  # noqa: BLE001 - a failure is a result here
        row.update(ok=False, error=type(e).__name__, message=" ".join(str(e).split())[:240],
                   time_s=time.perf_counter() - t0)
        return row
    c = a.totals.cost
    module_params = g.meta.get("module_params")
    row.update(ok=True, time_s=time.perf_counter() - t0, capture=g.meta.get("capture", ""),
               gmacs=c.matrix_flops / 2e9, weight_bytes=c.weight_bytes, n_ops=len(g),
               totals={"matrix_flops": c.matrix_flops, "vector_flops": c.vector_flops,
                       "weight_bytes": c.weight_bytes, "act_bytes": c.act_bytes},
               params=module_params, data_dims=g.meta.get("default_dims", {}),
               unknown=sorted(a.summary.unknown))
    if job["ops_g"]:
        row["gmacs_err"] = row["gmacs"] / job["ops_g"] - 1
    if job["num_params"] and module_params:
        row["params_err"] = module_params / job["num_params"] - 1
        bits = 8 if job["class"] == "quantized" else 32
        row["weight_x"] = c.weight_bytes / (job["num_params"] * bits / 8)
    return row


def _fmt(r: dict[str, Any]) -> str:
    if not r["ok"]:
        return f"{r['name']:<40} {r['class']:<14} FAILED {r['error']}: {r['message'][:150]}"
    err = f"{r['gmacs_err']:+7.1%}" if "gmacs_err" in r else "    n/a"
    perr = f"{r['params_err']:+6.1%}" if "params_err" in r else "   n/a"
    wx = f"{r['weight_x']:5.2f}x" if "weight_x" in r else "   n/a"
    ref = f"{r['ops_g']:9.3f}" if r["ops_g"] else "      n/a"
    cap = "export" if r["capture"].startswith("torch.export") else "dispatch"
    dd = f"  dims {len(r['data_dims'])}" if r["data_dims"] else ""
    unk = f"  unknown {','.join(r['unknown'])[:60]}" if r["unknown"] else ""
    return (f"{r['name']:<40} {r['class']:<14} {r['gmacs']:9.3f} {ref} {err}  params {perr}  weights {wx}  "
            f"{cap:<8} {r['time_s']:6.1f}s{dd}{unk}")


def summary(rows: list[dict[str, Any]]) -> str:
    lines = ["", f"{'class':<16}{'models':>7}{'ok':>5}{'median |err|':>14}{'worst err':>24}{'failures':>10}"]
    for cls in dict.fromkeys(r["class"] for r in rows):
        rs = [r for r in rows if r["class"] == cls]
        ok = [r for r in rs if r["ok"]]
        errs = [r for r in ok if "gmacs_err" in r]
        med = f"{statistics.median(abs(r['gmacs_err']) for r in errs):.2%}" if errs else "n/a"
        worst = max(errs, key=lambda r: abs(r["gmacs_err"]), default=None)
        w = f"{worst['gmacs_err']:+.1%} {worst['name'][:14]}" if worst else "n/a"
        lines.append(f"{cls:<16}{len(rs):>7}{len(ok):>5}{med:>14}{w:>24}{len(rs) - len(ok):>10}")
    fails: dict[str, list[str]] = {}
    for r in rows:
        if not r["ok"]:
            fails.setdefault(r["error"], []).append(r["name"])
    if fails:
        lines.append("failures by class: " + "; ".join(f"{k} {len(v)} ({', '.join(v[:4])})" for k, v in fails.items()))
    over = [r for r in rows if r["ok"] and r.get("weight_x", 0) > 1.05]
    if over:
        lines.append("weight bytes > 1.05x the parameters: " +
                     ", ".join(f"{r['name']} {r['weight_x']:.2f}x" for r in over))
    t = [r["time_s"] for r in rows if r["ok"]]
    if t:
        lines.append(f"time: median {statistics.median(t):.2f}s, total {sum(t):.0f}s over {len(t)} models")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="regex on model names")
    p.add_argument("--classes", help="comma-separated classes to run (classification, detection, segmentation, "
                   "video, optical_flow, quantized, timm)")
    p.add_argument("--capture", default="auto", choices=["auto", "export", "dispatch"])
    p.add_argument("--hw", default="a100")
    p.add_argument("--timm", type=int, default=0, help="also run this many timm architectures (one per family)")
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args(argv)
    try:
        jobs = _torchvision_jobs()
    except ModuleNotFoundError as e:
        print(f"torchvision is not installed ({e}); nothing to run", file=sys.stderr)
        return 1
    jobs += _timm_jobs(a.timm)
    if a.only:
        jobs = [j for j in jobs if re.search(a.only, j["name"])]
    if a.classes:
        jobs = [j for j in jobs if j["class"] in a.classes.split(",")]
    print(f"{'model':<40} {'class':<14} {'GMACs':>9} {'_ops':>9} {'err':>7}  params / num_params  "
          f"weight bytes / params  capture time")
    rows = []
    for j in jobs:
        r = run_one(j, a.capture, a.hw)
        rows.append(r)
        print(_fmt(r), flush=True)
    print(summary(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
