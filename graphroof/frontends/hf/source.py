"""transformers models as LLM sources: prefill and a real decode step traced with a KV cache.

The model is built on the meta device from its config (:func:`graphroof.frontends.hf.build.build_model`, no weights)
and wrapped in a module whose inputs are the token ids and, per layer, the cached keys and values
``[batch, kv_heads, past, head_dim]`` (graph inputs marked ``Role.KV_CACHE``).  The wrapper fills a
transformers ``DynamicCache`` with them and runs the model's own forward with ``use_cache=True``, so each
attention layer appends its new keys / values to the cache and attends over all of it, exactly as
``generate`` does; :mod:`graphroof.llm.kvcache` then costs the append as a cache write of the new entries.

* prefill: ``input_ids [batch, prompt]`` with an empty cache (``past = 0``): writes ``prompt`` tokens per layer;
* decode: ``input_ids [batch, 1]`` with ``past`` cached tokens: reads ``past + 1``, writes 1 per layer.

Models that are not causal LMs (no cache) are traced as a plain forward over the whole context.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import replace
from typing import Any

from ...errors import FrontendError, InputError
from ...graph import OpGraph, Role, TensorSpec
from ..source import LLMSource, Param
from .compat import LibraryChanged
from .config import spec_from_config

__all__ = ["HFSource", "layer_windows", "mark_windows", "spec_from_config", "window_note"]

_PREFIX = "lm"


def layer_windows(cfg, layers: int | None) -> tuple[int | None, ...] | None:
    """Per layer, the attention window its KV cache keeps (sliding or chunked layers), None for a full-context
    layer; None when every layer keeps the full context.  Read from the cache transformers builds for the config
    (``layer_types``, ``sliding_window``, ``sliding_window_pattern``, ``attention_chunk_size``), so it agrees with
    what the model's forward does."""
    try:
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache(config=cfg)
    except Exception:  # noqa: BLE001 - a config transformers' cache cannot read: full context
        return None
    out = tuple(getattr(layer, "sliding_window", None) for layer in cache.layers)
    if not layers or len(out) != layers or not any(out):
        return None
    return tuple(int(w) if isinstance(w, int) and w > 0 else None for w in out)


_LAYER = re.compile(r"(?:^|\.)(?:layers|h|layer|blocks)\.(\d+)(?:\.|$)")
_ATTENTION_OPS = ("aten.scaled_dot_product_attention", "aten._scaled_dot_product_flash_attention",
                  "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_cudnn_attention")


def mark_windows(g: OpGraph, windows: tuple[int | None, ...]) -> OpGraph:
    """Set ``attrs["window"]`` on the attention op of every sliding-window layer (by the layer index in its
    scope, ``model.layers.<i>.self_attn``), so prefill counts the (query, key) pairs inside the window."""
    out = g.map_ops(lambda op: op)
    for op in g.ops():
        if op.op not in _ATTENTION_OPS:
            continue
        m = _LAYER.search(op.scope)
        if not m or int(m.group(1)) >= len(windows) or not windows[int(m.group(1))]:
            continue
        out.set(op.name, "op", replace(op, attrs={**op.attrs, "window": windows[int(m.group(1))]}))
    return out


def window_note(windows: tuple[int | None, ...]) -> str:
    sliding = [w for w in windows if w]
    sizes = ", ".join(str(w) for w in sorted(set(sliding)))
    return (f"attention windows: {len(sliding)} of {len(windows)} layers attend to a window of {sizes} tokens "
            "(sliding or chunked, as the config's layer types say): their KV cache holds at most that many tokens "
            "and decode reads only those; chunked layers are counted as a sliding window of the chunk size (the "
            "most a chunk holds); a decode range crossing the window is interpolated between its ends")


def _generates(model) -> bool:
    """A model that ``generate``s token by token (causal LM heads: ``*ForCausalLM``, ``GPT2LMHeadModel`` ...)."""
    from .build import is_causal_lm

    try:
        return bool(model.can_generate()) or is_causal_lm(model)
    except Exception:  # noqa: BLE001 - a model class without the transformers API
        return is_causal_lm(model)


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _recording(update, probe: dict, i: int):
    def record(key_states, value_states, *args, **kwargs):
        probe[i] = (tuple(key_states.shape), tuple(value_states.shape))
        return update(key_states, value_states, *args, **kwargs)

    return record


#: what graphroof sets on an attention layer of transformers' cache to hand it the cached keys / values
_KV_LAYER_ATTRS = ("keys", "values", "is_initialized", "update")


def _step_module(model):
    import torch

    from .compat import cache_argument, cache_class, require_attrs

    class CachedStep(torch.nn.Module):
        """One forward step of *model* over a KV cache given as tensors (graph inputs)."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        #: tokens already in the context (a sliding-window layer holds fewer: its cache input is shorter)
        context = 0
        #: when a dict: record, per layer, the shapes of the keys / values the model hands its cache
        probe: dict | None = None
        #: logits of the last position only (what a serving engine samples from), where forward supports it
        last_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
        #: the forward's cache argument (transformers 5.24: ``cache``; before: ``past_key_values``, Mamba's
        #: ``cache_params``); a forward with none of them is an error naming the release
        cache_arg = cache_argument(model.forward, type(model).__name__)
        #: ``(cache layer, index, past) -> bool``: fills a recurrent-state layer (:mod:`graphroof.frontends.hf.ssm_source`)
        states = None

        def forward(self, input_ids, **past):
            cache = cache_class("DynamicCache")(config=self.lm.config)
            for i, layer in enumerate(cache.layers):
                if self.states is not None and self.states(layer, i, past):
                    continue
                if f"past_key_{i}" not in past:  # probe: the layer initialises itself from what it receives
                    if self.probe is not None:
                        require_attrs(layer, ("update",), "a KV cache layer")
                        layer.update = _recording(layer.update, self.probe, i)
                    continue
                require_attrs(layer, _KV_LAYER_ATTRS, "a KV cache layer")
                k, v = past[f"past_key_{i}"], past[f"past_value_{i}"]
                layer.dtype, layer.device = k.dtype, k.device
                layer.keys, layer.values = k, v
                layer.is_initialized = True
                if hasattr(layer, "cumulative_length"):  # sliding / chunked: positions and mask from the context
                    layer.cumulative_length = self.context
            kw = {"logits_to_keep": 1} if self.last_logits else {}
            return self.lm(input_ids=input_ids, **{self.cache_arg: cache}, use_cache=True, **kw).logits

    return CachedStep(model)


def _meta_probe(step, probe: dict, fold: bool = True) -> bool:
    """Run the one-token probe step as a plain forward on meta tensors (no capture: the probe only reads the
    shapes the cache receives); *fold*: one block per group of identical layers runs (:mod:`.probe`), and on any
    failure the whole forward.  False when the model is not on the meta device or the forward fails there
    (data-dependent ops), so the caller traces the probe instead."""
    import torch

    from .probe import skipped_blocks

    try:
        if any(p.device.type != "meta" for p in step.lm.parameters()):
            return False
        with torch.no_grad():
            x = torch.zeros((1, 1), dtype=torch.long, device="meta")
            if not fold:
                step(x)
            else:
                with skipped_blocks(step.lm, probe):
                    step(x)
    except Exception:  # noqa: BLE001 - any failure: the whole forward, then the traced probe decides
        probe.clear()
        return _meta_probe(step, probe, False) if fold else False
    return bool(probe)


def _strip_prefix(g: OpGraph, prefix: str) -> OpGraph:
    from dataclasses import replace

    def fix(op):
        s = op.scope
        if s == prefix:
            s = ""
        elif s.startswith(prefix + "."):
            s = s[len(prefix) + 1:]
        return op if s == op.scope else replace(op, scope=s)

    return g.map_ops(fix)


class HFSource(LLMSource):
    """A transformers model: built from its config dict *data* on the meta device (or already built: *built*, as
    :func:`~graphroof.frontends.hf.build.build_model` returns it), or given as *model*.  *fold*: captures fold runs
    of identical blocks (``Options.fold``)."""

    def __init__(self, data: dict[str, Any] | None = None, *, name: str, dtype: str | None = None,
                 capture: str = "dispatch", source: str = "config", model: Any = None,
                 experts_touched: float | None = None, mla_absorbed: bool = True, fold: bool = True,
                 built: tuple[Any, Any, str] | None = None):
        from ..torch.common import dtype_name as torch_dtype_name
        from .build import build_model

        self.fold = fold
        if model is None:
            self.model, self.cfg, dtype_name = built or build_model(data, dtype=dtype, source=source)
            how = f"built from its transformers config on the meta device ({type(self.model).__name__}, {dtype_name})"
        else:
            self.model, self.cfg = model, model.config
            floats = [p.dtype for p in model.parameters() if p.is_floating_point()]
            dtype_name = torch_dtype_name(floats[0]) if floats else "fp32"
            how = f"transformers {type(model).__name__} ({dtype_name})"
        self.spec = spec_from_config(self.cfg, name, dtype_name)
        self.capture = capture
        if experts_touched is not None and not experts_touched > 0:
            raise InputError(f"--experts-touched must be > 0, got {experts_touched:g}")
        self.experts_touched = experts_touched
        self.mla_absorbed = mla_absorbed  # MLA decode in the latent space, as engines run it (frontends/hf/mla.py)
        last = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self.notes = [f"{how}; " + ("prefill computes the logits of the last prompt position only (logits_to_keep=1), "
                                    "as serving engines do" if last else
                                    "prefill computes logits for every prompt position, as the model's forward does")]
        from .build import eager_attention_note

        eager = eager_attention_note(self.model)
        if eager:
            self.notes.append(eager)
        generates = _generates(self.model)
        self.kv_cache = bool(generates and getattr(self.cfg, "use_cache", True) is not False
                             and self.spec.layers and self.spec.kv_heads and self.spec.head_dim)
        if not self.kv_cache:
            self.no_cache_reason = (f"{type(self.model).__name__} does not generate with a transformers cache"
                                    if not generates else "its config gives no KV-cache layout")
        if self.kv_cache:
            self.spec = replace(self.spec, windows=layer_windows(self.cfg, self.spec.layers))
            if self.spec.windows:
                self.notes.append(window_note(self.spec.windows))
        self._step = _step_module(self.model) if self.kv_cache else None
        self._layout: dict | None = None
        self._dtype = dtype_name

    def _trace(self, inputs: dict, kv_names: tuple[str, ...], module, causal: bool, what: str) -> OpGraph:
        import logging

        from ..moe import mark_moe_routing
        from ..torch.common import one_line
        from ..torch.export import load_module
        from .build import eager_prompt

        quiet = logging.getLogger("torch._subclasses.fake_tensor")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # its failed-op traceback would go to stderr; the error says it all
        try:
            with eager_prompt():
                g = load_module(module, inputs, kv_inputs=kv_names, capture=self.capture, name=self.spec.name,
                                causal_masks=causal, fold_blocks=self.fold)
        except LibraryChanged:  # already names the release and what was expected
            raise
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            if msg.startswith("could not trace") and ") by " in msg:  # keep the cause, not every input's spec
                msg = "by " + msg.split(") by ", 1)[1]
            else:
                msg = one_line(e)
            raise FrontendError(f"{self.spec.name}: the {what} could not be traced: {msg[:400]}") from None
        finally:
            quiet.setLevel(level)
        g = mark_moe_routing(_strip_prefix(g, _PREFIX) if module is self._step else g, self.experts_touched)
        if self.spec.windows:
            g = mark_windows(g, self.spec.windows)
        note = g.meta.get("moe_routing")
        if note and note not in self.notes:
            self.notes.append(note)
        return g

    def kv_layout(self) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Per layer, the (key, value) cache entry shapes without batch and sequence: ``(heads, dim)`` each, as
        the model hands them to its cache in a traced one-token step (MLA caches a single-head latent
        ``[1, kv_lora_rank]`` and a rope key ``[1, rope_dim]``); the config's ``[kv_heads, head_dim]`` when
        that probe fails.  Layers that never write the cache are absent."""
        if self._layout is None:
            s = self.spec
            guess = {i: ((s.kv_heads, s.head_dim), (s.kv_heads, s.head_dim)) for i in range(s.layers)}
            probe: dict = {}
            self._step.probe = probe
            try:
                if not _meta_probe(self._step, probe, self.fold):  # a plain meta forward; else a traced step
                    probe.clear()
                    self._trace({"input_ids": ((1, 1), "int64")}, (), self._step, True, "cache-layout probe")
            except Exception:  # noqa: BLE001 - no probe: the config's layout (a real trace then reports)
                probe = {}
            finally:
                self._step.probe = None
            self._layout = {i: (k[1:-2] + k[-1:], v[1:-2] + v[-1:]) for i, (k, v) in probe.items()} or guess
            elems = sum(_prod(k) + _prod(v) for k, v in self._layout.values())
            self.spec = replace(self.spec, kv_elems_per_token=elems)
            if probe and any(lay != guess.get(i) for i, lay in self._layout.items()):
                first = self._layout[min(self._layout)]
                self.notes.append(f"KV cache layout read from what the model's cache receives in a traced step: "
                                  f"{elems:,} elements per token over {len(self._layout)} layers (layer "
                                  f"{min(self._layout)}: keys {list(first[0])}, values {list(first[1])} per token), "
                                  "not kv_heads x head_dim from the config")
        return self._layout

    def _cached(self, batch: int, q: int, past: int) -> OpGraph:
        layout = self.kv_layout()
        s = self.spec
        inputs: dict[str, Any] = {"input_ids": ((batch, q), "int64")}
        names = []
        windows = s.windows or (None,) * s.layers
        for i in range(s.layers):
            if i not in layout:
                continue
            # a sliding-window layer keeps the last W - 1 tokens: the step attends to at most W keys
            held = min(past, windows[i] - 1) if windows[i] else past
            for kind, shape in zip(("key", "value"), layout[i]):
                n = f"past_{kind}_{i}"
                inputs[n] = TensorSpec((batch, *shape[:-1], held, shape[-1]), self._dtype, Role.KV_CACHE)
                names.append(n)
        self._step.context = past
        what = (f"prefill (batch {batch}, prompt {q})" if past == 0 and q > 1
                else f"decode step (batch {batch}, past {past})")
        if q > 1 or not self.mla_absorbed:
            return self._trace(inputs, tuple(names), self._step, True, what)
        from .mla import MLA_NOTE, absorbed_mla

        with absorbed_mla(self.model) as absorbed:
            g = self._trace(inputs, tuple(names), self._step, True, what)
        if absorbed and MLA_NOTE not in self.notes:
            self.notes.append(MLA_NOTE)
        return g

    def prefill_graph(self, batch: int, seq: int) -> OpGraph:
        if self.kv_cache:
            return self._cached(batch, seq, 0)
        inputs: dict[str, Any] = {"input_ids": ((batch, seq), "int64")}
        if getattr(self.cfg, "use_cache", False):
            inputs["use_cache"] = False
        return self._trace(inputs, (), self.model, _generates(self.model), f"forward (batch {batch}, seq {seq})")

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        if not self.kv_cache:
            raise FrontendError(f"{self.name}: {self.no_cache_reason}")
        return self._cached(batch, 1, past)

    def params(self) -> list[Param]:
        from ..torch.common import spec_of

        out = []
        for name, p in self.model.named_parameters():
            scope = name.rsplit(".", 1)[0] if "." in name else ""
            out.append((scope, spec_of(p, Role.WEIGHT)))
        return out
