"""Measured vs predicted on this machine: a CNN, a BERT-base-sized encoder and a small Llama (random weights),
each through the PyTorch path (torch.profiler) and the ONNX path (exported here with torch.onnx.export, run
with onnxruntime's profiler).  Prints one row per (model, path) with the error figures graphroof reports.

    python benchmarks/profile_models.py --hw my-device.yaml        # profile from `graphroof calibrate`
    python benchmarks/profile_models.py                            # calibrates first (about 10 s)
    python benchmarks/profile_models.py --models cnn --paths torch --save out/

Every figure is a measurement on this machine at the time of the run; nothing is fixed in the script.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def resnet18():
    """ResNet-18 layout (BasicBlocks 2-2-2-2, widths 64-512), written out so torchvision is not needed."""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, 2, 1))
            chans, layers, cin = (64, 128, 256, 512), [], 64
            for i, c in enumerate(chans):
                layers.append(nn.Sequential(Block(cin, c, 1 if i == 0 else 2), Block(c, c, 1)))
                cin = c
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.stem(x)
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.pool(x).flatten(1))

    return ResNet18()


def build(name: str, batch: int, seq: int):
    """(module in eval mode with random weights, example inputs tuple, ONNX input names)."""
    import torch

    torch.manual_seed(0)
    if name == "cnn":
        return resnet18().eval(), (torch.randn(batch, 3, 224, 224),), ["x"]
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

    ids = torch.randint(0, 1000, (batch, seq))
    if name == "bert":  # BERT-base: 12 layers, hidden 768, 12 heads, FFN 3072
        return BertModel(BertConfig(attn_implementation="sdpa")).eval(), (ids,), ["input_ids"]
    if name == "llama":  # small Llama: 8 layers, hidden 512, 8 heads, FFN 1376, vocab 32000
        cfg = LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8,
                          num_key_value_heads=8, vocab_size=32000, max_position_embeddings=2048, use_cache=False,
                          attn_implementation="sdpa")
        return LlamaForCausalLM(cfg).eval(), (ids,), ["input_ids"]
    raise SystemExit(f"unknown model {name!r}; use cnn, bert, llama")


def export_onnx(module, inputs, names, path: Path) -> None:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, str(path), dynamo=True, input_names=names, verbose=False)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", default=None, help="hardware profile of this machine (default: calibrate now)")
    ap.add_argument("--models", default="cnn,bert,llama")
    ap.add_argument("--paths", default="torch,onnx")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--runs", type=int, default=None, help="passes per measurement (default: ~2 s worth)")
    ap.add_argument("--ort-opt", default="basic")
    ap.add_argument("--save", default=None, help="directory for the markdown / JSON reports and ONNX files")
    args = ap.parse_args(argv)

    from tabulate import tabulate

    from graphroof.measure import measure_model
    from graphroof.report import render
    from graphroof.units import fmt_time

    save = Path(args.save) if args.save else None
    if save:
        save.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.TemporaryDirectory(prefix="graphroof-bench-")
    hw = args.hw
    if hw is None:
        from graphroof.measure.calibrate import calibrate

        t0 = time.perf_counter()
        cal = calibrate("cpu")
        hw = str(Path(tmp.name) / "local.yaml")
        Path(hw).write_text(cal.to_yaml("local"))
        print(f"calibrated in {time.perf_counter() - t0:.1f} s -> {hw}", file=sys.stderr)

    rows = []
    for name in args.models.split(","):
        module, inputs, names = build(name, args.batch, args.seq)
        for path in args.paths.split(","):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if path == "torch":
                    c = measure_model(module, inputs, hw=hw, runs=args.runs)
                else:
                    onnx_file = (save or Path(tmp.name)) / f"{name}.onnx"
                    if not onnx_file.exists():
                        export_onnx(module, inputs, names, onnx_file)
                    c = measure_model(str(onnx_file), hw=hw, runs=args.runs, ort_opt=args.ort_opt)
            wall = time.perf_counter() - t0
            s = c.summary
            if save:
                (save / f"{name}-{path}.md").write_text(render(c, "markdown", ops=True, top=25))
                (save / f"{name}-{path}.json").write_text(c.to_json())
            pct = lambda v: "-" if v is None else f"{100 * v:.0f}%"  # noqa: E731
            x = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
            share_unm = s["unmatched_event_time_s"] / max(1e-12, s["unmatched_event_time_s"] + s["matched_op_time_s"])
            rows.append([name, path, fmt_time(s["predicted_s"]), fmt_time(s["predicted_realistic_s"]),
                         fmt_time(s["measured_wall_s"]), x(s["ratio"]), x(s["ratio_realistic"]),
                         f"{x(s['layer_ratio_median'])} / {x(s['layer_ratio_p90'])}",
                         f"{x(s['layer_ratio_realistic_median'])} / {x(s['layer_ratio_realistic_p90'])}",
                         pct(s["bound_correct_share"]), pct(s["bound_overhead_share"]),
                         f"{s['n_matched']}/{s['n_work_nodes']}", pct(share_unm),
                         f"{wall:.1f} s", f"{_peak_rss_mb():.0f} MB"])
            print(f"done {name}/{path} in {wall:.1f} s", file=sys.stderr)
        del module
    load = os.getloadavg()
    print(f"hardware profile: {hw}; load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
          f"(1 / 5 / 15 min) on {os.cpu_count()} CPUs: other processes competing for the cores inflate measured times")
    print(tabulate(rows, headers=["model", "path", "pred (roof)", "pred (real)", "measured", "meas/roof",
                                  "meas/real", "layer med/p90 (roof)", "layer med/p90 (real)", "bound ok",
                                  "overhead", "matched", "unmapped time", "step wall", "peak RSS"],
                   disable_numparse=True))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
