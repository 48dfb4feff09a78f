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
    [timing]                          # optional: kernel-level model, see graphroof.timing.params
    [collectives]                     # optional: alpha-beta collectives, see graphroof.timing.params
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from .dtypes import canonical_dtype, peak_key_candidates
from .errors import GraphroofError, HardwareProfileError, sanitize_terminal
from .safe_read import clean_name, number, parse_json, parse_toml, parse_yaml, read_text, shown, shown_path
from .timing.params import CollectiveParams, KernelTiming, parse_collectives, parse_timing

__all__ = ["HardwareProfile", "load_hardware", "list_profiles", "profile_dir", "adhoc_profile"]

_PEAK_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")
_KINDS = ("gpu", "tpu", "cpu", "accelerator")


@dataclass(frozen=True)
class HardwareProfile:
    """One device.  Units are in the field names; see the module docstring for the file schema."""

    name: str
    matrix_peak_flops_per_s: dict[str, float]
    vector_peak_flops_per_s: dict[str, float]
    mem_bw_bytes_per_s: float
    display_name: str = ""
    vendor: str = ""
    kind: str = "gpu"
    aliases: tuple[str, ...] = ()
    mem_capacity_bytes: float | None = None
    onchip_cache_bytes: float | None = None
    interconnect_name: str = ""
    interconnect_bw_bytes_per_s: float | None = None  # per direction
    matrix_efficiency: float = 1.0
    vector_efficiency: float = 1.0
    mem_bw_efficiency: float = 1.0
    interconnect_efficiency: float = 1.0
    launch_overhead_s: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    path: str = ""
    timing: KernelTiming | None = None            # [timing]: kernel-level model (graphroof.timing)
    collectives: CollectiveParams | None = None   # [collectives]: alpha-beta collective model
    #: fp32 matmuls: ``high`` (default, as PyTorch's cuDNN convolutions) run on TF32 matrix units where the
    #: profile lists them; ``highest`` keeps fp32 math (vector units unless fp32 matrix units exist)
    matmul_precision: str = "high"
    #: [price]: a public on-demand list price per GPU-hour, its source and date (None: no price)
    usd_per_hour: float | None = None
    price_source: str = ""
    price_date: str = ""
    #: board_power_w: the vendor's board / module power (TDP, TBP), the most the device draws at full load, in
    #: watts; its source is ``sources["board_power_w"]`` (None: the profile does not give it)
    board_power_w: float | None = None

    # -- peaks ---------------------------------------------------------------------------------------
    def peak(self, unit: str, dtype: str) -> tuple[float, str]:
        """(peak FLOP/s, ``"matrix.bf16"``) for computing *dtype* on *unit*; falls back to a wider dtype."""
        table = self.matrix_peak_flops_per_s if unit == "matrix" else self.vector_peak_flops_per_s
        if not table and unit == "vector":  # no vector table (TPUs): the matrix units are all there is
            table, unit = self.matrix_peak_flops_per_s, "matrix"
        if unit == "matrix" and canonical_dtype(dtype) == "fp32" and self.matmul_precision == "high" \
                and table.get("tf32"):
            return table["tf32"], "matrix.tf32"  # TF32 tensor cores for fp32 matmuls (see matmul_precision)
        if unit == "matrix" and canonical_dtype(dtype) == "tf32" and not table.get("tf32"):
            dtype = "fp32"  # no TF32 units: fp32 math
        if unit == "matrix" and canonical_dtype(dtype) in ("fp32", "fp64") and canonical_dtype(dtype) not in table:
            # an fp32 / fp64 matmul without matrix units for it runs on the vector units (TF32 is opt-in)
            vec = self.vector_peak_flops_per_s.get(canonical_dtype(dtype))
            if vec:
                return vec, f"vector.{canonical_dtype(dtype)}"
        for key in peak_key_candidates(dtype):
            if table.get(key):
                return table[key], f"{unit}.{key}"
        key, val = max(table.items(), key=lambda kv: kv[1])  # last resort: the fastest listed
        return val, f"{unit}.{key}"

    def ridge_point(self, dtype: str = "bf16", unit: str = "matrix") -> float:
        """FLOP/byte where compute and memory time are equal: peak / bandwidth."""
        return self.peak(unit, dtype)[0] / self.mem_bw_bytes_per_s

    @property
    def label(self) -> str:
        return self.display_name or self.name

    def with_overrides(self, *, peak_flops_per_s: float | None = None, mem_bw_bytes_per_s: float | None = None,
                       ideal: bool = False, matmul_precision: str | None = None) -> HardwareProfile:
        """What-if copy: every peak set to *peak_flops_per_s*, bandwidth replaced; ``ideal`` zeroes overheads."""
        p = self
        if matmul_precision is not None:
            if matmul_precision not in ("high", "highest"):
                raise HardwareProfileError(f"matmul precision {matmul_precision!r}: use high (TF32 for fp32 matmuls "
                                           "where the device has it) or highest (fp32 math)")
            p = replace(p, matmul_precision=matmul_precision)
        if peak_flops_per_s is not None:
            p = replace(p, matrix_peak_flops_per_s={k: float(peak_flops_per_s) for k in (p.matrix_peak_flops_per_s or {"fp32": 0})},
                        vector_peak_flops_per_s={k: float(peak_flops_per_s) for k in (p.vector_peak_flops_per_s or {"fp32": 0})},
                        name=f"{p.name}+peak", display_name=f"{p.label} (peak FLOP/s overridden)")
        if mem_bw_bytes_per_s is not None:
            p = replace(p, mem_bw_bytes_per_s=float(mem_bw_bytes_per_s), name=f"{p.name}+bw",
                        display_name=f"{p.label} (bandwidth overridden)")
        if ideal:
            p = replace(p, matrix_efficiency=1.0, vector_efficiency=1.0, mem_bw_efficiency=1.0,
                        interconnect_efficiency=1.0, launch_overhead_s=0.0, timing=None, collectives=None)
        return p

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "display_name": self.label, "vendor": self.vendor, "kind": self.kind,
            "aliases": list(self.aliases),
            "matrix_peak_flops_per_s": dict(self.matrix_peak_flops_per_s),
            "vector_peak_flops_per_s": dict(self.vector_peak_flops_per_s),
            "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s, "mem_capacity_bytes": self.mem_capacity_bytes,
            "onchip_cache_bytes": self.onchip_cache_bytes, "interconnect_name": self.interconnect_name,
            "interconnect_bw_bytes_per_s": self.interconnect_bw_bytes_per_s,
            "efficiency": {"matrix": self.matrix_efficiency, "vector": self.vector_efficiency,
                           "mem_bw": self.mem_bw_efficiency, "interconnect": self.interconnect_efficiency,
                           "launch_overhead_s": self.launch_overhead_s},
            "sources": dict(self.sources), "path": self.path,
            "timing": dict(self.timing.__dict__) if self.timing else None,
            "collectives": dict(self.collectives.__dict__) if self.collectives else None,
            "price": ({"usd_per_hour": self.usd_per_hour, "source": self.price_source, "date": self.price_date}
                      if self.usd_per_hour is not None else None),
            "board_power_w": self.board_power_w,
        }


# -- loading -----------------------------------------------------------------------------------------

def profile_dir() -> Path:
    """The shipped profiles: ``graphroof/hw_profiles`` in a wheel, ``hw_profiles/`` in a source checkout."""
    try:
        packaged = Path(str(resources.files("graphroof") / "hw_profiles"))
        if packaged.is_dir():
            return packaged
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - only in odd installs
        pass
    return Path(__file__).resolve().parent.parent / "hw_profiles"


def _read_file(path: Path) -> dict[str, Any]:
    """The parsed fields of a profile file: a regular UTF-8 file of at most 64 MB, no YAML aliases, bounded
    nesting (:mod:`graphroof.safe_read`); every failure is a one-line :class:`HardwareProfileError`."""
    where, err = shown_path(path), HardwareProfileError
    parse = {".toml": parse_toml, ".yaml": parse_yaml, ".yml": parse_yaml, ".json": parse_json}.get(path.suffix)
    if parse is None:
        raise err(f"{where}: unknown profile format {shown(path.suffix)}; use .toml, .yaml or .json")
    data = parse(read_text(path, "hardware profile", err), where, err)
    if not isinstance(data, dict):
        raise err(f"{where}: a hardware profile must be a mapping of fields")
    return data


def _num(path: Path, field_name: str, v: Any, *, positive: bool = True, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if isinstance(v, str):
        from .units import parse_quantity

        try:
            v = parse_quantity(v)
        except GraphroofError:
            pass
    number(v, f"{_name(path)}: {field_name}", HardwareProfileError)  # NaN, inf, 400-digit integers refused
    if positive and v <= 0:
        raise HardwareProfileError(f"{_name(path)}: {field_name} must be > 0, got {v!r}")
    return float(v)


def _req(path: Path, field_name: str, v: Any, *, positive: bool = True) -> float:
    """:func:`_num` of a field that must be given (a number, never None)."""
    out = _num(path, field_name, v, positive=positive)
    assert out is not None
    return out


def _peaks(path: Path, data: dict, key: str, required: bool) -> dict[str, float]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise HardwareProfileError(f"{_name(path)}: {key} must be a table of dtype = FLOP/s, got {shown(table)}")
    if required and not table:
        raise HardwareProfileError(f"{_name(path)}: {key} is missing; give at least one dtype, e.g. bf16 = 312e12")
    out = {}
    for dt, v in table.items():
        if dt not in _PEAK_DTYPES:
            raise HardwareProfileError(f"{_name(path)}: {key}.{sanitize_terminal(dt)[:40]} is not a peak dtype; use one "
                                       f"of {', '.join(_PEAK_DTYPES)}")
        out[dt] = _req(path, f"{key}.{dt}", v)
    return out


def _eff(path: Path, eff: dict, k: str, default: float = 1.0) -> float:
    v = _req(path, f"efficiency.{k}", eff.get(k, default))
    if v > 1:
        raise HardwareProfileError(f"{_name(path)}: efficiency.{k} must be in (0, 1], got {v}")
    return v


def profile_from_dict(data: dict[str, Any], path: Path) -> HardwareProfile:
    """Validate a parsed profile; every error names the file and the field."""
    known = {"name", "display_name", "vendor", "kind", "aliases", "matrix_peak_flops_per_s",
             "vector_peak_flops_per_s", "memory", "interconnect", "efficiency", "sources", "notes",
             "timing", "collectives", "price", "board_power_w"}
    extra = sorted(str(k) for k in data if k not in known)
    if extra:
        raise HardwareProfileError(f"{_name(path)}: unknown field {shown(extra[0])}; known fields: "
                                   f"{', '.join(sorted(known))}")
    mem = data.get("memory")
    if not isinstance(mem, dict) or "bw_bytes_per_s" not in mem:
        raise HardwareProfileError(f"{_name(path)}: memory.bw_bytes_per_s is missing (memory bandwidth in bytes/s)")
    kind = data.get("kind", "gpu")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise HardwareProfileError(f"{_name(path)}: kind must be one of {', '.join(_KINDS)}, got {shown(kind)}")
    ic = _section(path, data, "interconnect")
    eff = _section(path, data, "efficiency")
    aliases = data.get("aliases", ())
    if not isinstance(aliases, (list, tuple)) or not all(isinstance(a, str) for a in aliases):
        raise HardwareProfileError(f"{_name(path)}: aliases must be a list of names, e.g. aliases = [\"a100\"], got "
                                   f"{shown(aliases)}")
    launch = _req(path, "efficiency.launch_overhead_s", eff.get("launch_overhead_s", 0.0), positive=False)
    if launch < 0:
        raise HardwareProfileError(f"{_name(path)}: efficiency.launch_overhead_s must be >= 0")
    sources = data.get("sources", {}) or {}
    if not isinstance(sources, dict):
        raise HardwareProfileError(f"{_name(path)}: sources must be a table of section = source text")
    usd, price_source, price_date = _price(path, data.get("price"))
    power = _num(path, "board_power_w", data.get("board_power_w"), optional=True)
    if power is not None and not str(sources.get("board_power_w") or "").strip():
        raise HardwareProfileError(f"{_name(path)}: board_power_w needs its source: add sources.board_power_w "
                                   "(the vendor datasheet that gives it)")
    return HardwareProfile(
        name=_text(path, data, "name") or clean_name(path.stem),
        display_name=_text(path, data, "display_name"),
        vendor=_text(path, data, "vendor"),
        kind=kind,
        aliases=tuple(clean_name(a).lower() for a in aliases),
        matrix_peak_flops_per_s=_peaks(path, data, "matrix_peak_flops_per_s", required=True),
        vector_peak_flops_per_s=_peaks(path, data, "vector_peak_flops_per_s", required=False),
        mem_bw_bytes_per_s=_req(path, "memory.bw_bytes_per_s", mem.get("bw_bytes_per_s")),
        mem_capacity_bytes=_num(path, "memory.capacity_bytes", mem.get("capacity_bytes"), optional=True),
        onchip_cache_bytes=_num(path, "memory.onchip_cache_bytes", mem.get("onchip_cache_bytes"), optional=True),
        interconnect_name=_text(path, ic, "name", "interconnect."),
        interconnect_bw_bytes_per_s=_num(path, "interconnect.bw_bytes_per_s_per_direction",
                                         ic.get("bw_bytes_per_s_per_direction"), optional=True),
        matrix_efficiency=_eff(path, eff, "matrix"),
        vector_efficiency=_eff(path, eff, "vector"),
        mem_bw_efficiency=_eff(path, eff, "mem_bw"),
        interconnect_efficiency=_eff(path, eff, "interconnect"),
        launch_overhead_s=launch,
        sources={clean_name(k): clean_name(v) for k, v in sources.items()},
        notes=_text(path, data, "notes"),
        path=str(path),
        timing=parse_timing(path, data.get("timing")),
        collectives=parse_collectives(path, data.get("collectives")),
        usd_per_hour=usd, price_source=price_source, price_date=price_date, board_power_w=power,
    )


def _price(path: Path, price: Any) -> tuple[float | None, str, str]:
    """``[price]``: usd_per_hour (> 0) with its source and date, all three or none."""
    if price is None:
        return None, "", ""
    if not isinstance(price, dict):
        raise HardwareProfileError(f"{_name(path)}: price must be a table with usd_per_hour, source and date")
    extra = sorted(set(price) - {"usd_per_hour", "source", "date"})
    if extra:
        raise HardwareProfileError(f"{_name(path)}: unknown field price.{extra[0]}; known: usd_per_hour, source, date")
    usd = _num(path, "price.usd_per_hour", price.get("usd_per_hour"))
    for k in ("source", "date"):
        if not str(price.get(k) or "").strip():
            raise HardwareProfileError(f"{_name(path)}: price.{k} is missing; a list price needs its source and date")
    return usd, _text(path, price, "source", "price."), _text(path, price, "date", "price.")


def _name(path: Path) -> str:
    """The profile's file name for a message (printable)."""
    return shown_path(path.name, 80)


def _section(path: Path, data: dict[str, Any], key: str) -> dict[str, Any]:
    """The optional table *key* (``efficiency``, ``interconnect``): a mapping, or empty when absent."""
    v = data.get(key)
    if v in (None, {}):
        return {}
    if not isinstance(v, dict):
        raise HardwareProfileError(f"{_name(path)}: {key} must be a table of fields ([{key}] in TOML), got {shown(v)}")
    return v


def _text(path: Path, table: dict[str, Any], key: str, prefix: str = "") -> str:
    """A text field (name, vendor, notes, a source) made printable: control characters escaped."""
    v = table.get(key)
    if v is None:
        return ""
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise HardwareProfileError(f"{_name(path)}: {prefix}{key} must be text, got {shown(v)}")
    return clean_name(v)


_CACHE: dict[str, HardwareProfile] = {}


def list_profiles() -> list[HardwareProfile]:
    """Every shipped profile, sorted by name."""
    out = []
    for p in sorted(profile_dir().glob("*.toml")):
        out.append(_load_path(p))
    return out


def _load_path(path: Path) -> HardwareProfile:
    key = str(path.resolve())
    if key not in _CACHE:
        _CACHE[key] = profile_from_dict(_read_file(path), path)
    return _CACHE[key]


def _index() -> dict[str, Path]:
    idx: dict[str, Path] = {}
    for p in sorted(profile_dir().glob("*.toml")):
        idx[p.stem.lower()] = p
    for p in sorted(profile_dir().glob("*.toml")):
        for a in _load_path(p).aliases:
            idx.setdefault(a, p)
    return idx


def load_hardware(name: str | Path | HardwareProfile) -> HardwareProfile:
    """A profile by name or alias (``"a100"``, ``"h100"``) or from a file path.

    >>> load_hardware("a100").mem_bw_bytes_per_s
    2039000000000.0
    """
    if isinstance(name, HardwareProfile):
        return name
    s = str(name)
    path = Path(s).expanduser()
    if path.suffix in (".toml", ".yaml", ".yml", ".json") or path.exists() or "/" in s:
        if not path.exists():  # a FIFO, a device or a folder exists: _read_file says what it is
            raise HardwareProfileError(f"hardware profile file {shown(s)} not found; pass an existing .toml/.yaml path "
                                       "or a name from `graphroof hw list`")
        return _load_path(path)
    idx = _index()
    key = s.lower().replace("_", "-").replace(" ", "-")
    if key in idx:
        return _load_path(idx[key])
    close = difflib.get_close_matches(key, idx, n=4, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise HardwareProfileError(f"unknown hardware {shown(s)}{hint}; see `graphroof hw list` or pass a profile file path")


def adhoc_profile(peak_flops_per_s: float, mem_bw_bytes_per_s: float, name: str = "custom") -> HardwareProfile:
    """A device defined by two numbers only (the textbook roofline): one peak for every dtype and unit."""
    peaks = {k: float(peak_flops_per_s) for k in _PEAK_DTYPES}
    return HardwareProfile(
        name=name, display_name=f"ad-hoc device ({name})", kind="accelerator",
        matrix_peak_flops_per_s=peaks, vector_peak_flops_per_s=dict(peaks),
        mem_bw_bytes_per_s=float(mem_bw_bytes_per_s),
        sources={"all": "given on the command line (--peak-flops / --mem-bw)"},
    )

