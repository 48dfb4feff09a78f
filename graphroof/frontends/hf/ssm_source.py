"""State-space and hybrid LLMs (Mamba, Mamba-2, Jamba ...): decode with the recurrent state.

A state-space layer does not keep one entry per token: it keeps a fixed-size state per sequence, for Mamba a
conv state ``[d_inner, d_conv]`` (the last inputs of its causal conv) and an SSM state ``[d_inner, d_state]``
(Mamba-2: ``[heads, head_dim, d_state]``).  transformers holds them in the cache's linear-attention layers
(``LinearAttentionLayer``, one per state-space layer); attention layers of a hybrid (Jamba) keep their KV cache.

:class:`SSMSource` traces as :class:`~graphroof.frontends.hf.source.HFSource` does, plus:

* **layout**: a one-token traced step records, per state-space layer, the conv and recurrent states the model
  hands its cache (shapes and dtypes, as transformers keeps them: the conv state in the model dtype, the SSM
  state in fp32 as the reference scan and the CUDA kernels produce it); attention layers' K / V as HFSource;
* **prefill**: the scans run whole (:mod:`graphroof.frontends.hf.ssm_kernels`) and write each layer's last state into the
  cache once (KV-role bytes); the recurrent state is stored as the scan returns it, not copied again;
* **decode**: one token per sequence with every layer's states as ``Role.KV_CACHE`` graph inputs: the state
  update and the conv update read them and write them back (``graphroof.selective_state_update``,
  ``graphroof.causal_conv1d_update``).  A pure state-space model's step is independent of the context.

Memory: a sequence holds its state (:meth:`SSMSource.state_bytes_per_seq`) however long it is, plus the
attention layers' KV per token.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...counters.rules.ssm import STATE_OPS
from ...dtypes import dtype_bits
from ...graph import OpGraph, Role, TensorSpec
from .source import HFSource, _generates, _step_module

__all__ = ["SSMSource", "STATE_OPS", "has_state_layers", "hf_source", "state_note"]


#: (conv state shape, conv dtype, recurrent state shape, recurrent dtype) per layer, batch dim dropped
StateLayout = dict[int, tuple[tuple[int, ...] | None, str | None, tuple[int, ...] | None, str | None]]


def _state_layer_types():
    from .compat import cache_class

    return cache_class("LinearAttentionCacheLayerMixin")


#: config fields only state-space (Mamba-family) configs carry: such a config without transformers' state layers
#: is a library change, not a plain transformer
_SSM_FIELDS = ("ssm_state_size", "mamba_d_state", "mamba_d_conv", "mamba_expand", "time_step_rank")


def looks_recurrent(cfg) -> bool:
    """Whether *cfg* describes a state-space or hybrid model (by its fields, independent of transformers)."""
    kinds = getattr(cfg, "layer_types", None) or getattr(cfg, "layers_block_type", None) or ()
    return (any(getattr(cfg, f, None) is not None for f in _SSM_FIELDS)
            or "mamba" in str(getattr(cfg, "model_type", "")).lower()
            or any("mamba" in str(k).lower() for k in (kinds if isinstance(kinds, (list, tuple)) else ())))


def has_state_layers(cfg) -> bool:
    """Whether the cache transformers builds for *cfg* has recurrent-state (linear-attention) layers.  For a
    state-space config (:func:`looks_recurrent`) a cache transformers cannot build, or one without state layers,
    is an error naming the release (never a plain transformer priced with a KV cache)."""
    from .compat import changed

    recurrent = looks_recurrent(cfg)
    try:
        mixin = _state_layer_types()
        layers = _cache_layers(cfg)
    except Exception:
        if recurrent:
            raise
        return False  # a config transformers' cache cannot read: a plain model (its own trace reports)
    found = any(isinstance(layer, mixin) for layer in layers)
    if recurrent and not found:
        raise changed(f"the cache built for {type(cfg).__name__} has no {mixin.__name__} layer",
                      "one recurrent-state layer per state-space layer")
    return found


def _cache_layers(cfg) -> list:
    from .compat import cache_class, changed

    try:
        return list(cache_class("DynamicCache")(config=cfg).layers)
    except Exception as e:  # noqa: BLE001 - the message names the release
        if not looks_recurrent(cfg):
            raise
        raise changed(f"DynamicCache(config={type(cfg).__name__}) failed ({type(e).__name__}: {e})",
                      "a cache with one recurrent-state layer per state-space layer") from None


#: what graphroof sets on a recurrent-state cache layer to hand it the states of a decode step
_STATE_LAYER_ATTRS = ("conv_states", "recurrent_states", "is_conv_states_initialized",
                      "is_recurrent_states_initialized", "conv_kernel_size", "has_previous_state",
                      "update_conv_state", "update_recurrent_state")


def _dtype(t) -> str:
    from ..torch.common import dtype_name

    return dtype_name(t.dtype)


class _States:
    """The step module's hook for the cache's state layers: fills them from graph inputs (decode), or in a
    prefill stores the scan's last state without a copy and, while probing, records what each layer receives."""

    def __init__(self) -> None:
        self.probe: StateLayout | None = None

    def __call__(self, layer: Any, i: int, past: dict) -> bool:
        if not isinstance(layer, _state_layer_types()):
            return False
        from .compat import cache_class, require_attrs

        require_attrs(layer, _STATE_LAYER_ATTRS, "a recurrent-state cache layer")
        CacheLayerMixin = cache_class("CacheLayerMixin")
        # a layer that is both (linear attention + attention): its K / V are filled by the caller after this
        done = not isinstance(layer, CacheLayerMixin)
        conv, rec = past.get(f"conv_state_{i}"), past.get(f"ssm_state_{i}")
        if conv is not None or rec is not None:
            ref = conv if conv is not None else rec
            assert ref is not None
            layer.dtype, layer.device = ref.dtype, ref.device
            if conv is not None:
                layer.conv_states[0], layer.is_conv_states_initialized[0] = conv, True
                layer.conv_kernel_size[0] = conv.shape[-1]
            if rec is not None:
                layer.recurrent_states[0], layer.is_recurrent_states_initialized[0] = rec, True
            layer.has_previous_state[0] = True
            return done
        self._prefill(layer, i)
        return done

    def _prefill(self, layer: Any, i: int) -> None:
        probe = self.probe
        conv_update = layer.update_conv_state

        def update_conv_state(conv_states, state_idx=0, conv_kernel_size=None, **kwargs):
            out = conv_update(conv_states, state_idx, conv_kernel_size=conv_kernel_size, **kwargs)
            if probe is not None:
                st = layer.conv_states[state_idx]
                old = probe.get(i, (None, None, None, None))
                probe[i] = (tuple(st.shape[1:]), _dtype(st), old[2], old[3])
            return out

        def update_recurrent_state(recurrent_states, state_idx=0, **kwargs):
            # the scan op already wrote its last state (counted by its rule): keep it, no zeros + copy
            layer.recurrent_states[state_idx] = recurrent_states
            layer.is_recurrent_states_initialized[state_idx] = True
            if probe is not None:
                old = probe.get(i, (None, None, None, None))
                probe[i] = (old[0], old[1], tuple(recurrent_states.shape[1:]), _dtype(recurrent_states))
            return recurrent_states

        layer.update_conv_state = update_conv_state
        layer.update_recurrent_state = update_recurrent_state


class SSMSource(HFSource):
    """A transformers model whose cache has state-space layers (see the module docstring)."""

    def __init__(self, data: dict[str, Any] | None = None, **kw: Any):
        super().__init__(data, **kw)
        self._init_states()

    def _init_states(self) -> None:
        if self._step is None:  # no attention layers: HFSource saw no KV layout
            self._step = _step_module(self.model)
            self.no_cache_reason = ""
        self.kv_cache = True
        self._states = _States()
        self._step.states = self._states
        self._state_layout: StateLayout | None = None
        self._decoding = False
        #: no attention layer: no K / V probe needed, and a decode step does not depend on the context
        self._pure = _all_state_layers(self.cfg)
        self._decode_memo: dict[int, OpGraph] = {}

    # -- layout ------------------------------------------------------------------------------------------
    def kv_layout(self) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Attention layers' K / V entry shapes (HFSource's one-token probe, which records the states too); a
        pure state-space model has none, and its state layout is recorded by whichever step is traced first."""
        if self._layout is None:
            if self._pure:
                self._layout = {}
                return self._layout
            probe: dict = {}
            step: Any = self._step
            step.probe = probe
            try:
                self._trace({"input_ids": ((1, 1), "int64")}, (), step, True, "cache-layout probe")
            finally:
                step.probe = None
            self._layout = {i: (k[1:-2] + k[-1:], v[1:-2] + v[-1:]) for i, (k, v) in probe.items()}
            self._set_states(self._state_layout or {})
        return self._layout

    def _set_states(self, states: StateLayout) -> None:
        self._state_layout = states
        elems = sum(_prod(k) + _prod(v) for k, v in (self._layout or {}).values())
        self.spec = replace(self.spec, kv_elems_per_token=elems or None,
                            layers=self.spec.layers or len(states) or None, state_layers=len(states))
        note = state_note(self.spec.name, states, len(self._layout or {}), self.spec.layers)
        if note not in self.notes:
            self.notes.append(note)

    def state_layout(self) -> StateLayout:
        """Per state-space layer: (conv state shape, dtype, recurrent state shape, dtype), batch dim dropped."""
        self.kv_layout()
        if self._state_layout is None:  # nothing traced yet: a one-token step records it
            self._trace({"input_ids": ((1, 1), "int64")}, (), self._step, True, "cache-layout probe")
        return self._state_layout or {}

    def state_bytes_per_seq(self, kv_dtype: str | None = None) -> float:
        """Bytes of every layer's recurrent states for one sequence, unsplit (``kv_dtype`` re-types them); the
        estimate's memory fit takes them per device from the decode graph (what a step rewrites)."""
        total = 0.0
        for conv, conv_dt, rec, rec_dt in self.state_layout().values():
            for shape, dt in ((conv, conv_dt), (rec, rec_dt)):
                if shape is not None and dt is not None:
                    total += _prod(shape) * dtype_bits(kv_dtype or dt) / 8
        return total

    # -- graphs ------------------------------------------------------------------------------------------
    def _trace(self, inputs: dict, kv_names: tuple[str, ...], module, causal: bool, what: str) -> OpGraph:
        if self._decoding and module is self._step:
            batch = inputs["input_ids"][0][0]
            inputs = dict(inputs)
            names = list(kv_names)
            for i, (conv, conv_dt, rec, rec_dt) in sorted(self.state_layout().items()):
                for n, shape, dt in ((f"conv_state_{i}", conv, conv_dt), (f"ssm_state_{i}", rec, rec_dt)):
                    if shape is not None and dt is not None:
                        inputs[n] = TensorSpec((batch, *shape), dt, Role.KV_CACHE)
                        names.append(n)
            kv_names = tuple(names)
        record = module is self._step and not self._decoding and self._state_layout is None
        states: StateLayout = {}
        if record:
            self._states.probe = states
        try:
            g = super()._trace(inputs, kv_names, module, causal, what)
        finally:
            self._states.probe = None
        if module is self._step:
            self._check_ops(g, inputs["input_ids"][0][1] if not self._decoding else 1, what)
        if record:
            if not states:
                from .compat import changed

                raise changed(f"{self.spec.name}: the {what} handed no recurrent state to the cache's state layers",
                              "update_conv_state / update_recurrent_state calls on each state-space layer's "
                              "cache layer")
            self._set_states(states)
        return g

    def _check_ops(self, g: OpGraph, tokens: int, what: str) -> None:
        """A decode step must run graphroof's state-update ops, a prefill its whole-scan ops: otherwise
        transformers called its scans under other names and the step was traced as a per-token loop."""
        from .compat import changed
        from .ssm_kernels import SCAN_OPS

        ops = {op.op for op in g.ops()}
        if self._decoding and not ops & set(STATE_OPS):
            raise changed(f"{self.spec.name}: the {what} ran none of {', '.join(STATE_OPS)}",
                          "transformers' Mamba-family modules to call the state-update functions graphroof "
                          "replaces (frontends/hf/ssm_kernels.py _SWAPS)")
        if not self._decoding and tokens > 1 and not ops & set(SCAN_OPS):
            raise changed(f"{self.spec.name}: the {what} ran none of {', '.join(SCAN_OPS)}",
                          "transformers' Mamba-family modules to call the scan functions graphroof replaces "
                          "(frontends/hf/ssm_kernels.py _SWAPS)")

    def decode_graph(self, batch: int, past: int) -> OpGraph:
        """One token with every layer's states as cache inputs; a pure state-space model's step is the same
        graph at any context, traced once per batch."""
        if self._pure and batch in self._decode_memo:
            return self._decode_memo[batch]
        self.state_layout()
        self._decoding = True
        try:
            g = self._cached(batch, 1, past)
        finally:
            self._decoding = False
        if self._pure:
            self._decode_memo[batch] = g
        return g


def _all_state_layers(cfg) -> bool:
    from .compat import cache_class

    layers = _cache_layers(cfg)
    mixin, attention = _state_layer_types(), cache_class("CacheLayerMixin")
    return bool(layers) and all(isinstance(la, mixin) and not isinstance(la, attention) for la in layers)


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def state_note(name: str, states: StateLayout, attention_layers: int, layers: int | None) -> str:
    """One line: how many layers keep a recurrent state, its shapes and bytes per sequence."""
    if not states:
        return f"{name}: no recurrent state was recorded in a traced step"
    first = states[min(states)]
    parts = []
    if first[0] is not None:
        parts.append(f"conv state {list(first[0])} {first[1]}")
    if first[2] is not None:
        parts.append(f"SSM state {list(first[2])} {first[3]}")
    per_seq = sum(_prod(s) * dtype_bits(d) / 8 for c, cd, r, rd in states.values()
                  for s, d in ((c, cd), (r, rd)) if s is not None and d is not None)
    hybrid = (f"; the other {attention_layers} attention layer(s) keep a KV cache per token" if attention_layers
              else "; no attention layer: no KV cache grows with the context")
    return (f"recurrent state: {len(states)} of {layers or len(states)} layers are state-space layers, each keeping "
            f"a fixed {' + '.join(parts)} per sequence ({per_seq / 1e6:,.2f} MB per sequence over those layers, "
            "independent of the context length); a decode step reads and writes it once (KV-role bytes); prefill "
            f"runs each scan as one streamed kernel (state kept on chip, last state written once){hybrid}")


def hf_source(data: dict[str, Any] | None = None, **kw: Any) -> HFSource:
    """:class:`HFSource` for a transformers model, an :class:`SSMSource` when its cache has state-space layers
    (the model is built once, from *data*, before the class is chosen)."""
    model = kw.get("model")
    cfg = getattr(model, "config", None)
    if model is None:
        from .build import build_model

        if data is None:
            raise TypeError("hf_source needs a config dict or a model")

        built = build_model(data, dtype=kw.get("dtype"), source=kw.get("source", "config"))
        model, cfg = built[0], built[1]
        kw["built"] = built
    cls = SSMSource if has_state_layers(cfg) and _generates(model) else HFSource
    return cls(data, **kw)
