"""Hardware profiles: peak FLOP/s per unit and dtype, memory, interconnect, efficiencies, sources.

Profiles are TOML files in ``hw_profiles/`` (shipped inside the wheel as ``graphroof/hw_profiles``); a user
may pass a path to a ``.toml`` / ``.yaml`` / ``.json`` file of the same schema.  Schema (all rates in units
per second, bytes decimal)::

    name = "a100-80gb-sxm"            # also the file stem
    display_name = "NVIDIA A100 80GB SXM4"
    vendor = "NVIDIA"
    kind = "gpu"                      # gpu | tpu | cpu | accelerator
    aliases = ["a100"]
    board_power_w = 400               # optional: vendor TDP / TBP in watts (source: sources.board_power_w)
    compute_capability = "8.0"        # optional, NVIDIA: "major.minor" (source: sources.compute_capability); picks
                                      # which kernels PyTorch runs (graphroof.timing.moe.grouped_gemm_on)
    timing_origin = "fitted"          # optional: [timing] / [collectives] constants "fitted" on measured data or
                                      # "derived" (datasheets, other profiles); needs sources.timing (absent: read
                                      # from sources.timing; no [timing]: "assumed" efficiency factors)
    [matrix_peak_flops_per_s]         # dense (never 2:4-sparse) tensor-core / MXU peaks by dtype
    bf16 = 312e12
    [vector_peak_flops_per_s]         # non-matrix units (elementwise, softmax, norms)
    fp32 = 19.5e12
    [memory]
    bw_bytes_per_s = 2.039e12
    capacity_bytes = 80e9
    onchip_cache_bytes = 40e6
    [interconnect]                    # optional
    name = "NVLink 3"
    bw_bytes_per_s_per_direction = 300e9
    [efficiency]                      # default realistic-mode factors (explicit data, never hidden)
    matrix = 0.7
    vector = 0.7
    mem_bw = 0.8
    interconnect = 0.8
    launch_overhead_s = 5e-6
    [sources]                         # one source per section; derived numbers say how
    matrix_peak_flops_per_s = "..."
    [price]                           # optional: a public on-demand list price, with where and when
    usd_per_hour = 1.49               # per GPU-hour (``graphroof sweep`` uses it without --usd-per-hour)
    source = "Jarvislabs on-demand A100 80GB, jarvislabs.ai/blog/h100-vs-a100"
    date = "2026-04"
    [timing]                          # optional: kernel-level model, see graphroof.hardware.params
    [collectives]                     # optional: alpha-beta collectives, see graphroof.hardware.params

The package: :mod:`~graphroof.hardware.profile` (the :class:`HardwareProfile`), :mod:`~graphroof.hardware.load`
(reading and validating files), :mod:`~graphroof.hardware.params` (the ``[timing]`` / ``[collectives]`` sections).
A profile is plain data: the timing models that read it live in :mod:`graphroof.timing`, one level up.
"""

from __future__ import annotations

from .load import adhoc_profile, list_profiles, load_hardware, profile_dir, profile_from_dict, profiles_replaced
from .params import CollectiveParams, KernelTiming
from .profile import HardwareProfile

__all__ = ["HardwareProfile", "profiles_replaced", "load_hardware", "list_profiles", "profile_dir", "adhoc_profile", "profile_from_dict",
           "KernelTiming", "CollectiveParams"]
