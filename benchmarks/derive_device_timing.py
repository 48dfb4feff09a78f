"""Write the kernel-level [timing] and [collectives] sections of the non-NVIDIA profiles (AMD, TPU, Gaudi, Xeon).

    PYTHONPATH=. python benchmarks/derive_device_timing.py           # print the sections
    PYTHONPATH=. python benchmarks/derive_device_timing.py --write   # write them into hw_profiles/*.toml

The same model as the NVIDIA profiles (graphroof.timing: tiles and waves over the device's compute units, streaming
bandwidth, launches, alpha-beta collectives with a latency term); its constants here are *derived*, each with its
source in the profile's sources.timing / sources.collectives:

* compute units (CUs / MXUs / MMEs / cores), the tile the device's matrix unit or GEMM library works on: datasheets
  and architecture papers (per device below);
* the large-GEMM ceiling: the achievable-matmul ("MAMF") row of kernels.csv where the device has one
  (``[timing.gemm_achievable_flops_per_s]``), and ``gemm_matrix_efficiency`` solved so that the model reproduces that
  row at its own shape (the one measured number the device has); without a row, the profile's ``[efficiency]``
  matrix factor (an assumption, said so);
* bandwidth fractions: the profile's ``[efficiency].mem_bw`` (GEMM weight streaming), the A100 fit's per-kind
  streaming fractions capped at it;
* fixed times: the A100 fit's GEMM / streaming kernel latency for kernel-launched devices (GPUs, Gaudi), 1 us for a
  TPU's compiled ops (no kernel launch), the profile's own ``launch_overhead_s``;
* collectives: ring over the device's links at the profile's interconnect efficiency; NCCL-like libraries (RCCL,
  HCCL) with the A100's fitted host-launched base latency and hop latency and its gpt-fast-fitted device part;
  TPUs: XLA collectives compiled into the program (no host part).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_kernel_model import toml_of, write_profile  # noqa: E402

from graphroof.hardware import load_hardware  # noqa: E402
from graphroof.hardware.params import KernelTiming  # noqa: E402
from graphroof.timing import gemm_time_with  # noqa: E402

REF = "a100-80gb-sxm"  # the fitted reference for constants a device has no data for
MAMF = "kernels.csv MLENG_MAMF row ({dev} {dtype}: {tflops} TFLOP/s at M,N,K = {m},{n},{k}; stas00/ml-engineering " \
       "compute/accelerator/README.md {line})"

# name: compute units and their source, tile and its source, tile_m_min, MAMF rows (dtype, TFLOP/s, M, N, K, line),
# the fixed kernel times (None: the A100 fit's), collectives
DEVICES = {
    "mi300x-192gb-oam": dict(
        units=304, units_src="AMD CDNA 3 architecture whitepaper (2023): MI300X 304 compute units (8 XCDs x 38 CUs)",
        tile=(256, 256), tile_src="hipBLASLt / Tensile macro tile 256x256 (MT256x256) of large bf16 GEMMs on CDNA 3",
        m_min=16, m_min_src="MFMA 16x16x16 bf16 instruction: the smallest M of a tile",
        mamf=[("bf16", 668.4, 10240, 15360, 8192, "L361")], library="rccl", custom=True,
        inter=dict(inter_hop_latency_s=10e-6, inter_bw_bytes_per_s_per_nic=40e9, nics_per_node=8),
        inter_src="nics_per_node 8 x 400 Gb/s NICs per 8-GPU MI300X platform at 80% = inter_bw_bytes_per_s_per_nic "
                  "40 GB/s, inter_hop_latency_s 10 us per network hop (assumptions, as the H100 profile's)"),
    "mi250x-128gb-oam": dict(
        units=220, units_src="AMD CDNA 2 architecture whitepaper (2021): MI250X 2 GCDs x 110 compute units",
        tile=(128, 128), tile_src="rocBLAS / Tensile macro tile 128x128 of large bf16 GEMMs on CDNA 2",
        m_min=16, m_min_src="MFMA 16x16x16 bf16 instruction", mamf=[], mamf_like="mi300x-192gb-oam",
        library="rccl", custom=True),
    "tpu-v4-32gb": dict(
        units=8, units_src="Google Cloud TPU docs 'TPU v4': 2 TensorCores x 4 MXUs per chip (275 TFLOP/s = 8 MXUs x "
                           "128x128 MACs x 2 x 1.05 GHz)",
        tile=(128, 128), tile_src="the 128x128 systolic MXU", m_min=8, m_min_src="8 sublanes of a vector register",
        mamf=[], library="xla", fixed=(1e-6, 1e-6)),
    "tpu-v5e-16gb": dict(
        units=4, units_src="Google Cloud TPU docs 'TPU v5e': 1 TensorCore x 4 MXUs per chip (197 TFLOP/s = 4 x "
                           "128x128 MACs x 2 x 1.5 GHz)",
        tile=(128, 128), tile_src="the 128x128 systolic MXU", m_min=8, m_min_src="8 sublanes of a vector register",
        mamf=[], library="xla", fixed=(1e-6, 1e-6)),
    "tpu-v5p-95gb": dict(
        units=8, units_src="Google Cloud TPU docs 'TPU v5p': 2 TensorCores x 4 MXUs per chip (459 TFLOP/s = 8 x "
                           "128x128 MACs x 2 x 1.75 GHz)",
        tile=(128, 128), tile_src="the 128x128 systolic MXU", m_min=8, m_min_src="8 sublanes of a vector register",
        mamf=[], library="xla", fixed=(1e-6, 1e-6)),
    "tpu-v6e-32gb": dict(
        units=4, units_src="Google Cloud TPU docs 'TPU v6e': 256x256 MXUs, 918 TFLOP/s = 4 x 256x256 MACs x 2 x "
                           "1.75 GHz",
        tile=(256, 256), tile_src="the 256x256 systolic MXU of Trillium", m_min=8,
        m_min_src="8 sublanes of a vector register", mamf=[], library="xla", fixed=(1e-6, 1e-6)),
    "gaudi2-96gb-oam": dict(
        units=2, units_src="Intel Gaudi 2 white paper (2022): 2 matrix multiplication engines (MMEs), 24 TPCs",
        tile=(256, 256), tile_src="the MME's 256x256 MAC array (432 TFLOP/s = 2 x 65,536 MACs x 2 x 1.65 GHz)",
        m_min=16, m_min_src="assumption (the MME's geometry is configurable)",
        mamf=[("bf16", 418.7, 14336, 15360, 2048, "L350"), ("fp8", 826.5, 6144, 11264, 5120, "L369")],
        library="hccl"),
    "gaudi3-128gb-oam": dict(
        units=8, units_src="Intel Gaudi 3 white paper (2024): 8 MMEs (4 per die), 64 TPCs",
        tile=(256, 256), tile_src="the MME's 256x256 MAC array (1835 TFLOP/s = 8 x 65,536 MACs x 2 x 1.75 GHz)",
        m_min=16, m_min_src="assumption (the MME's geometry is configurable)",
        mamf=[("bf16", 1243.0, 16384, 4096, 768, "L357"), ("fp8", 1289.5, 16640, 1536, 3072, "L371")],
        library="hccl"),
    "xeon-platinum-8480plus": dict(
        units=56, units_src="Intel ARK Xeon Platinum 8480+: 56 cores, one AMX unit each",
        tile=(32, 32), tile_src="oneDNN brgemm block of 2x2 AMX tiles (16 rows x 16 fp32 columns each)",
        m_min=16, m_min_src="an AMX tile's 16 rows", mamf=[], library="oneccl", fixed=(5e-6, 3e-6)),
}

LIBS = {  # host-launched base, device part, hop latency: where they come from
    "rccl": "base_latency_s / intra_hop_latency_s: the A100's NCCL fit on the Vidur all-reduce table (RCCL assumed "
            "alike: no RCCL measurements in the data); device_latency_s / device_hop_latency_s: the A100's gpt-fast "
            "CUDA-graph fit (benchmarks/fit_graph_allreduce.py), HIP graphs as CUDA graphs",
    "hccl": "base_latency_s / device_latency_s: the A100's NCCL fits (HCCL assumed alike, HPU graphs as CUDA "
            "graphs); intra_hop_latency_s 3 us: a RoCE NIC-to-NIC hop (assumption)",
    "xla": "XLA compiles the collective into the step's program: no host part (device_latency_s = base_latency_s "
           "= 5 us, an assumption); intra_hop_latency_s 1 us: 'sub-microsecond latency between adjacent chips' over "
           "ICI (Google TPU ICI descriptions), rounded up",
    "oneccl": "oneCCL shared-memory / UPI all-reduce: base_latency_s 10 us, intra_hop_latency_s 1 us (assumptions), "
              "no graphs on a CPU (device_latency_s = base_latency_s)",
}


def _gemm_eff(dev, timing, dtype, tflops, m, n, k):
    """gemm_matrix_efficiency for which the model reproduces the MAMF row (capped at 1)."""
    peak = dev.matrix_peak_flops_per_s[dtype]
    in_b = 1.0 if dtype == "fp8" else 2.0
    lo, hi = 0.05, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        t = gemm_time_with(m, n, k, timing=replace(timing, gemm_matrix_efficiency=mid), peak_flops_per_s=peak,
                           mem_bw_bytes_per_s=dev.mem_bw_bytes_per_s, in_bytes=in_b,
                           achievable_flops_per_s=tflops * 1e12).t_s
        lo, hi = (mid, hi) if 2 * m * n * k / t < tflops * 1e12 else (lo, mid)
    return round(hi, 3)


def _rate(dev, timing, dtype, tflops, m, n, k):
    in_b = 1.0 if dtype == "fp8" else 2.0
    t = gemm_time_with(m, n, k, timing=timing, peak_flops_per_s=dev.matrix_peak_flops_per_s[dtype],
                       mem_bw_bytes_per_s=dev.mem_bw_bytes_per_s, in_bytes=in_b, achievable_flops_per_s=tflops * 1e12)
    return 2 * m * n * k / t.t_s


def derive(name, ref_timing, ref_coll, graph_d):
    d = DEVICES[name]
    dev = load_hardware(name)
    mem = dev.mem_bw_efficiency
    gemm_lat, stream_lat = d.get("fixed") or (ref_timing["gemm_latency_s"], ref_timing["stream_latency_s"])
    stream = {k: round(min(v, mem), 3) for k, v in ref_timing["stream_bw_efficiency"].items()}
    t = dict(sm_count=d["units"], gemm_tile=list(d["tile"]), gemm_tile_m_min=d["m_min"],
             gemm_split_k_min=ref_timing["gemm_split_k_min"], gemm_tile_policy="best",
             gemm_overlap_exponent=ref_timing.get("gemm_overlap_exponent", 2.0),
             gemm_matrix_efficiency=dev.matrix_efficiency, gemm_mem_bw_efficiency=mem, gemm_latency_s=gemm_lat,
             stream_latency_s=stream_lat, launch_overhead_s=dev.launch_overhead_s,
             graph_launch_overhead_s=ref_timing["graph_launch_overhead_s"], stream_bw_efficiency=stream)
    src_eff = f"gemm_matrix_efficiency {dev.matrix_efficiency}: the profile's [efficiency].matrix (assumption, no " \
              "achievable-matmul row for this device)"
    if d["mamf"]:
        t["gemm_achievable_flops_per_s"] = {dt: tf * 1e12 for dt, tf, *_ in d["mamf"]}
        kt = KernelTiming(**{**{k: v for k, v in t.items() if k != "gemm_tile"}, "gemm_tile": tuple(d["tile"])})
        dt, tf, m, n, k, line = d["mamf"][0]
        # the efficiency solved for the row, and the compute / memory overlap that lets the model reach it (the
        # A100 fit's p = 2 first; a row it cannot reach even at efficiency 1 picks the next closest overlap)
        best = None
        for p in (ref_timing.get("gemm_overlap_exponent", 2.0), 3.0, 4.0, 6.0, None):
            kp = replace(kt, gemm_overlap_exponent=p)
            eff = _gemm_eff(dev, kp, dt, tf, m, n, k)
            err = abs(_rate(dev, replace(kp, gemm_matrix_efficiency=eff), dt, tf, m, n, k) / (tf * 1e12) - 1)
            if best is None or err < best[0] - 1e-3:
                best = (err, p, eff)
        _, p, eff = best
        t["gemm_matrix_efficiency"], t["gemm_overlap_exponent"] = eff, p
        if p is None:
            del t["gemm_overlap_exponent"]
        rows = "; ".join(MAMF.format(dev=dev.label, dtype=x[0], tflops=x[1], m=x[2], n=x[3], k=x[4], line=x[5])
                         for x in d["mamf"])
        src_eff = (f"gemm_achievable_flops_per_s: {rows}; gemm_matrix_efficiency {eff}"
                   f"{'' if p == ref_timing.get('gemm_overlap_exponent', 2.0) else ' and no gemm_overlap_exponent (full compute / memory overlap)' if p is None else f' and gemm_overlap_exponent {p}'}: "
                   f"solved so that the model reproduces the {dt} row at its shape (model {best[0]:.1%} off it)")
    elif d.get("mamf_like"):
        like = load_hardware(d["mamf_like"])
        ratio = like.timing.gemm_achievable_flops_per_s["bf16"] / like.matrix_peak_flops_per_s["bf16"] \
            * like.timing.gemm_matrix_efficiency if like.timing else dev.matrix_efficiency
        t["gemm_matrix_efficiency"] = round(ratio, 3)
        src_eff = (f"gemm_matrix_efficiency {t['gemm_matrix_efficiency']}: the {d['mamf_like']} achievable-matmul "
                   "fraction of peak (same vendor library; no row for this device)")
    fixed = ("gemm_latency_s / stream_latency_s: 1 us per compiled op (HBM -> on-chip DMA and pipeline fill; no kernel "
             "launch), an assumption" if d.get("fixed") and d["library"] == "xla" else
             "gemm_latency_s / stream_latency_s: a oneDNN primitive's and a parallel loop's fork/join, assumptions"
             if d.get("fixed") else f"gemm_latency_s / stream_latency_s: the {REF} fit")
    src_t = (f"derived (benchmarks/derive_device_timing.py): sm_count {d['units']}: {d['units_src']}; gemm_tile "
             f"{list(d['tile'])}: {d['tile_src']}; gemm_tile_m_min {d['m_min']}: {d['m_min_src']}; gemm_split_k_min / "
             f"gemm_overlap_exponent: the {REF} fit (benchmarks/fit_kernel_model.py on the Vidur data); gemm_tile_policy "
             f"best: a library / compiler that picks the fewest-wave tile; {src_eff}; "
             f"gemm_mem_bw_efficiency {mem}: the profile's [efficiency].mem_bw (assumption); stream_bw_efficiency: "
             f"the {REF} fit per kind capped at it; {fixed}; launch_overhead_s: the profile's [efficiency] value; "
             f"graph_launch_overhead_s: the {REF} assumption (one graph / program launch per step)")
    link = dev.interconnect_bw_bytes_per_s
    lib = d["library"]
    c = dict(algorithms=["ring"], library=lib, intra_bus_bw_bytes_per_s=float(f"{link * dev.interconnect_efficiency:.3g}"))
    if lib in ("rccl", "hccl"):
        c.update(base_latency_s=ref_coll["base_latency_s"], device_latency_s=graph_d[0],
                 intra_hop_latency_s=ref_coll["intra_hop_latency_s"] if lib == "rccl" else 3e-6)
        if lib == "rccl":
            c["device_hop_latency_s"] = graph_d[1]
    elif lib == "xla":
        c.update(base_latency_s=5e-6, device_latency_s=5e-6, intra_hop_latency_s=1e-6)
    else:
        c.update(base_latency_s=10e-6, device_latency_s=10e-6, intra_hop_latency_s=1e-6)
    if lib == "hccl":  # 21 of the 24 ports are the board's all-to-all scale-up links
        c["intra_bus_bw_bytes_per_s"] = float(f"{link * 21 / 24 * dev.interconnect_efficiency:.3g}")
    src_c = (f"derived (benchmarks/derive_device_timing.py): algorithms [ring]: the device's library runs a ring "
             f"within the node; intra_bus_bw_bytes_per_s: the profile's interconnect "
             f"bandwidth per direction x [efficiency].interconnect{' x 21/24 scale-up ports' if lib == 'hccl' else ''}; "
             f"{LIBS[lib]}")
    if d.get("custom"):
        c.update(custom_latency_s=float(f"{stream_lat + 2 * c['intra_hop_latency_s']:.3g}"),
                 p2p_bw_bytes_per_s=c["intra_bus_bw_bytes_per_s"])
        src_c += ("; custom_latency_s: a one-shot kernel's fixed time = stream_latency_s + 2 barriers x "
                  "intra_hop_latency_s (vLLM's custom all-reduce on ROCm); p2p_bw_bytes_per_s: the links' bandwidth "
                  "at the interconnect efficiency (each GPU reads its peers over its own links)")
    if d.get("inter"):
        c.update(d["inter"])
        src_c += f"; inter-node: {d['inter_src']}"
    return dev, t, c, src_t, src_c


def set_origin(path: Path, origin: str) -> None:
    """``timing_origin = "..."`` among the profile's top-level fields (after ``kind``)."""
    lines = path.read_text().split("\n")
    line = f"timing_origin = {json.dumps(origin)}"
    hit = [i for i, x in enumerate(lines) if x.startswith("timing_origin = ")]
    if hit:
        lines[hit[0]] = line
    else:
        at = next(i for i, x in enumerate(lines) if x.startswith("kind = "))
        lines.insert(at + 1, line)
    path.write_text("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the sections into hw_profiles/*.toml")
    args = ap.parse_args(argv)
    ref = tomllib.loads(Path(load_hardware(REF).path).read_text())
    ref_t, ref_c = ref["timing"], ref["collectives"]
    graph_d = (ref_c.get("device_latency_s", ref_c["base_latency_s"]),
               ref_c.get("device_hop_latency_s", ref_c["intra_hop_latency_s"]))
    order = [n for n in DEVICES if not DEVICES[n].get("mamf_like")] + [n for n in DEVICES if DEVICES[n].get("mamf_like")]
    for name in order:
        dev, t, c, src_t, src_c = derive(name, ref_t, ref_c, graph_d)
        blocks = [toml_of("timing", t), toml_of("collectives", c)]
        print(f"# {name}\n" + "\n\n".join(blocks) + "\n")
        if args.write:
            write_profile(Path(dev.path), blocks, {"timing": src_t, "collectives": src_c})
            set_origin(Path(dev.path), "derived")
            from graphroof.hardware import load as _load

            _load._CACHE.clear()  # the next device may read this one (mamf_like)


if __name__ == "__main__":
    main()
