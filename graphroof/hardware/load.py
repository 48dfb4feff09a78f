"""Loading hardware profiles: the shipped ``hw_profiles/`` and user files (``.toml`` / ``.yaml`` / ``.json``), each
validated field by field (every error names the file and the field)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import GraphroofError, HardwareProfileError, sanitize_terminal
from ..safe_read import clean_name, number, parse_json, parse_toml, parse_yaml, read_text, shown, shown_path
from .params import parse_collectives, parse_timing
from .profile import HardwareProfile

__all__ = ["load_hardware", "list_profiles", "profile_dir", "adhoc_profile", "profile_from_dict", "profiles_replaced"]

_PEAK_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")
_KINDS = ("gpu", "tpu", "cpu", "accelerator")


def profile_dir() -> Path:
    """The shipped profiles: ``graphroof/hw_profiles`` in a wheel, ``hw_profiles/`` in a source checkout."""
    try:
        packaged = Path(str(resources.files("graphroof") / "hw_profiles"))
        if packaged.is_dir():
            return packaged
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - only in odd installs
        pass
    return Path(__file__).resolve().parents[2] / "hw_profiles"


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
        from ..units import parse_quantity

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
             "timing", "collectives", "price", "board_power_w", "timing_origin", "compute_capability"}
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
    origin = _origin(path, data, sources)
    cc = _compute_capability(path, data.get("compute_capability"), sources)
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
        timing_origin=origin, compute_capability=cc,
    )


_CC = re.compile(r"^[1-9][0-9]?\.[0-9]$")


def _compute_capability(path: Path, v: Any, sources: dict) -> str | None:
    """``compute_capability``: the NVIDIA CUDA compute capability as a ``"major.minor"`` string (``"9.0"``), with
    its ``sources.compute_capability``; None when absent."""
    if v is None:
        return None
    if not isinstance(v, str) or not _CC.match(v):
        raise HardwareProfileError(f"{_name(path)}: compute_capability must be an NVIDIA CUDA compute capability "
                                   f"as a quoted \"major.minor\" string, e.g. compute_capability = \"9.0\" (H100), "
                                   f"got {shown(v)}")
    if not str(sources.get("compute_capability") or "").strip():
        raise HardwareProfileError(f"{_name(path)}: compute_capability needs its source: add "
                                   "sources.compute_capability (NVIDIA's CUDA GPUs list, developer.nvidia.com/cuda-gpus)")
    return v


def _origin(path: Path, data: dict[str, Any], sources: dict) -> str:
    """``timing_origin``: ``fitted`` | ``derived``, given with a ``[timing]`` section and its ``sources.timing``."""
    v = data.get("timing_origin")
    if v is None:
        return ""
    if v not in ("fitted", "derived"):
        raise HardwareProfileError(f"{_name(path)}: timing_origin must be \"fitted\" (constants fitted on measured data) "
                                   f"or \"derived\" (from datasheets / other profiles), got {shown(v)}")
    if data.get("timing") is None:
        raise HardwareProfileError(f"{_name(path)}: timing_origin is set but the profile has no [timing] section; add "
                                   "[timing] or remove timing_origin")
    if not str(sources.get("timing") or "").strip():
        raise HardwareProfileError(f"{_name(path)}: timing_origin = {v!r} needs sources.timing (what each [timing] "
                                   "constant was fitted on or derived from)")
    return str(v)


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


#: the name / alias index of the shipped profiles, per (folder, its profile files): a file added or removed is a
#: new key (a file's content is read once per process anyway: ``_CACHE``)
_INDEX: dict[tuple, dict[str, Path]] = {}


def _index() -> dict[str, Path]:
    folder = profile_dir()
    files = sorted(folder.glob("*.toml"))
    key = (str(folder), tuple(p.name for p in files))
    if key not in _INDEX:
        idx: dict[str, Path] = {}
        for p in files:
            idx[p.stem.lower()] = p
        for p in files:
            for a in _load_path(p).aliases:
                idx.setdefault(a, p)
        _INDEX.clear()
        _INDEX[key] = idx
    return dict(_INDEX[key])


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


@contextmanager
def profiles_replaced(profiles: Collection[HardwareProfile]) -> Iterator[None]:
    """While inside, :func:`load_hardware` of each bundled profile's name (or alias) gives the profile passed in
    (e.g. a hold-out variant of it); the cache is restored on exit."""
    keys = {str(_index()[hw.name].resolve()): hw for hw in profiles}
    saved = {k: _CACHE.get(k) for k in keys}
    try:
        _CACHE.update(keys)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                _CACHE.pop(k, None)
            else:
                _CACHE[k] = v
