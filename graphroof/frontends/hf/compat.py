"""Every transformers piece that graphroof's capture relies on, looked up in one place, failing loudly.

Tracing a transformers model with a KV cache or a recurrent state reaches inside the library: its cache classes
(``DynamicCache`` and the layer classes it builds), the attributes graphroof fills on those layers, the name of
the forward's cache argument, the masking utility whose packed-sequence check reads tensor values, and the scan
functions of state-space models.  A release that renames or drops one of them must not turn into an empty layout
and wrong figures (transformers 5.24 renamed ``past_key_values`` / ``cache_params`` to ``cache``: graphroof's
cache went unused and a Mamba model was priced with a 22.8 GB "KV cache").  So each lookup here either returns
the piece or raises :class:`LibraryChanged`, a :class:`~graphroof.errors.FrontendError` naming the installed
version, what was expected and the versions the suite was run green with (``requirements.lock``).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

from ...errors import FrontendError

__all__ = ["LibraryChanged", "attention_functions", "eager_prompt", "TESTED_TRANSFORMERS", "cache_argument", "cache_class", "require_attrs",
           "transformers_version"]

#: the transformers releases the suite was run green with (the lock pins the newest; tools/check_latest.sh and
#: tools/check_versions.sh re-check): keep in line with requirements.lock
TESTED_TRANSFORMERS = ("5.23.0", "5.24.0")

#: the forward's cache argument, newest name first (5.24: ``cache``; earlier: ``past_key_values`` for attention
#: models, ``cache_params`` for Mamba-family models; the old names stay as deprecated aliases for a while)
CACHE_ARGUMENTS = ("cache", "past_key_values", "cache_params")


class LibraryChanged(FrontendError):
    """A third-party piece the capture relies on is missing or changed shape in the installed release."""


def transformers_version() -> str:
    try:
        import transformers
    except ModuleNotFoundError:  # pragma: no cover - callers import transformers first
        return "(not installed)"
    return str(transformers.__version__)


def changed(what: str, expected: str) -> LibraryChanged:
    """The error for a piece *what* that is not as *expected* in the installed transformers."""
    tested = " and ".join(TESTED_TRANSFORMERS)
    return LibraryChanged(
        f"transformers {transformers_version()}: {what}: expected {expected}; graphroof was tested with transformers "
        f"{tested} - install the locked versions (./run setup, or pip install -c requirements.lock ...) or report "
        "this release as unsupported")


def cache_class(name: str) -> Any:
    """``transformers.cache_utils.<name>`` (``DynamicCache``, ``CacheLayerMixin``,
    ``LinearAttentionCacheLayerMixin``, ``DynamicLayer``, ``EncoderDecoderCache``)."""
    try:
        from transformers import cache_utils
    except ImportError as e:
        raise changed("transformers.cache_utils cannot be imported", f"the module ({e})") from None
    cls = getattr(cache_utils, name, None)
    if cls is None:
        raise changed(f"transformers.cache_utils.{name} is missing",
                      "the cache class graphroof fills with its cache inputs")
    return cls


def cache_argument(forward: Any, model_name: str = "the model") -> str:
    """The name under which *forward* takes its cache object: the first of :data:`CACHE_ARGUMENTS` in its
    signature (decorators that keep ``__wrapped__``, as transformers' ``deprecate_kwarg`` does, are seen
    through)."""
    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    for name in CACHE_ARGUMENTS:
        if name in params:
            return name
    raise changed(f"{model_name}.forward takes none of {', '.join(CACHE_ARGUMENTS)}",
                  "a cache argument through which graphroof hands the model its KV cache / recurrent state")


def require_attrs(obj: Any, names: tuple[str, ...], what: str) -> None:
    """Raise :class:`LibraryChanged` unless *obj* has every attribute in *names*."""
    missing = [n for n in names if not hasattr(obj, n)]
    if missing:
        raise changed(f"{what} ({type(obj).__module__}.{type(obj).__name__}) has no {', '.join(missing)}",
                      f"the attributes {', '.join(names)} that graphroof fills")


def attention_functions() -> Any:
    """``transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS``, the registry whose ``get_interface`` picks a
    model's attention function (graphroof routes MLA decode through it)."""
    try:
        from transformers import modeling_utils
    except ImportError as e:
        raise changed("transformers.modeling_utils cannot be imported", f"the module ({e})") from None
    registry = getattr(modeling_utils, "ALL_ATTENTION_FUNCTIONS", None)
    if registry is None or not callable(getattr(registry, "get_interface", None)):
        raise changed("transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS.get_interface is missing",
                      "the attention-function registry graphroof routes MLA decode through")
    return registry


def packed_sequence_check() -> tuple[Any, str]:
    """``(transformers.masking_utils, "find_packed_sequence_indices")``: the check that reads position values to
    detect packed sequences (a ``.item()`` that a meta / fake tensor cannot answer), which graphroof turns off
    while tracing one unpadded prompt."""
    try:
        from transformers import masking_utils
    except ImportError as e:
        raise changed("transformers.masking_utils cannot be imported", f"the module ({e})") from None
    name = "find_packed_sequence_indices"
    if not callable(getattr(masking_utils, name, None)):
        raise changed(f"transformers.masking_utils.{name} is missing",
                      "the packed-sequence check graphroof turns off while tracing (it reads tensor values)")
    return masking_utils, name


@contextlib.contextmanager
def eager_prompt() -> Iterator[None]:
    """Trace as eager inference on one unpadded prompt runs: no packed-sequence detection (it reads values);
    state-space mixers run their scans as whole ops (:func:`graphroof.frontends.hf.ssm_kernels.ssm_kernels`).  A
    transformers release without the packed-sequence check is an error naming it (:mod:`.compat`)."""
    from .ssm_kernels import ssm_kernels

    module, name = packed_sequence_check()
    orig = getattr(module, name)
    setattr(module, name, lambda *a, **k: None)
    try:
        with ssm_kernels():
            yield
    finally:
        setattr(module, name, orig)
