"""The real side of ``graphroof calibrate``: torch microbenchmark kernels and facts about the host.

Only this module imports torch.  See :mod:`graphroof.measure.calibrate` for what is measured and how it is timed.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from collections.abc import Callable
from typing import Any

__all__ = ["TorchKernels", "host_info"]


# -- torch kernels ------------------------------------------------------------------------------------

class TorchKernels:
    """Builds the benchmark callables on one torch device.  Only this class imports torch."""

    def __init__(self, device: str = "cpu"):
        import torch

        self.torch = torch
        self.device = device
        self._dt = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

    def _rand(self, shape, dtype: str):
        return self.torch.rand(shape, dtype=self._dt[dtype], device=self.device)

    def gemm(self, n: int, dtype: str) -> tuple[Callable[[], Any], float, str]:
        a, b = self._rand((n, n), dtype), self._rand((n, n), dtype)
        c = self.torch.empty((n, n), dtype=self._dt[dtype], device=self.device)
        mm = self.torch.mm
        return (lambda: mm(a, b, out=c)), 2.0 * n**3, f"torch.mm {n}x{n} @ {n}x{n}"  # 2 FLOPs per MAC

    def fma(self, nbytes: int, dtype: str) -> tuple[Callable[[], Any], float, str]:
        n = max(1, nbytes // (self.torch.finfo(self._dt[dtype]).bits // 8))
        x, y, z = self._rand(n, dtype), self._rand(n, dtype), self._rand(n, dtype)
        o = self.torch.empty(n, dtype=self._dt[dtype], device=self.device)
        addcmul = self.torch.addcmul
        return (lambda: addcmul(x, y, z, out=o)), 2.0 * n, f"torch.addcmul x+y*z, {n} elements ({nbytes // 1024} KiB per operand)"

    def copy(self, nbytes: int) -> tuple[Callable[[], Any], float, str]:
        n = max(1, nbytes // 4)
        src = self._rand(n, "fp32")
        dst = self.torch.empty(n, dtype=self.torch.float32, device=self.device)
        return (lambda: dst.copy_(src)), 2.0 * 4 * n, f"copy_ of {4 * n / 1e6:.0f} MB fp32 (read + write)"

    def tiny(self) -> tuple[Callable[[], Any], float, str]:
        x = self.torch.ones(1, device=self.device)
        add = self.torch.add
        return (lambda: add(x, x)), 1.0, "torch.add of 1 element, new output (per-op dispatch + allocation)"


# -- host facts ---------------------------------------------------------------------------------------

def _cpuinfo() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                k, sep, v = line.partition(":")
                if sep and k.strip() not in out:
                    out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def _meminfo_bytes() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _llc_bytes() -> float | None:
    """Size of the largest CPU cache listed in sysfs (Linux), in bytes."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = None
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size"), encoding="utf-8") as f:
                    s = f.read().strip()
            except OSError:
                continue
            mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(s[-1:], 1)
            v = float(s.rstrip("KMG")) * mult
            best = max(best or 0.0, v)
    except (OSError, ValueError):
        return None
    return best


def host_info(device: str = "cpu", threads: int | None = None) -> dict[str, Any]:
    """Model name, vendor, memory, cache, torch version and thread count of the device measured."""
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "threads": threads or torch.get_num_threads(),
                            "date": _dt.date.today().isoformat(), "hostname": platform.node()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(model=props.name, vendor="NVIDIA", kind="gpu", capacity_bytes=float(props.total_memory),
                    cache_bytes=float(getattr(props, "L2_cache_size", 0)) or None)
        return info
    cpu = _cpuinfo()
    vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(cpu.get("vendor_id", ""), cpu.get("vendor_id", ""))
    info.update(model=cpu.get("model name") or platform.processor() or platform.machine(), vendor=vendor,
                kind="cpu", capacity_bytes=_meminfo_bytes(), cache_bytes=_llc_bytes())
    return info
