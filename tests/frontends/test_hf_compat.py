"""transformers changing under us: every piece the capture relies on is found or is a loud error naming the
release (graphroof.frontends.hf.compat); old and new cache-argument names; a transformers model passed as a
module is traced as the config path traces it (no value-reading packed-sequence check)."""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

import graphroof  # noqa: E402
from graphroof.frontends.hf import compat as hf_compat  # noqa: E402
from graphroof.frontends.hf.compat import LibraryChanged, cache_argument  # noqa: E402
from graphroof.frontends.hf.ssm_source import SSMSource, hf_source  # noqa: E402

MAMBA = {"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "state_size": 8, "expand": 2, "conv_kernel": 4, "vocab_size": 128, "time_step_rank": 4,
         "torch_dtype": "bfloat16"}
VERSION = transformers.__version__


# -- the forward's cache argument: transformers <= 5.23 and >= 5.24 spell it differently ---------------------

def _old_attention(input_ids, past_key_values=None, use_cache=None, **kwargs):  # <= 5.23 attention models
    return input_ids


def _old_mamba(input_ids, cache_params=None, use_cache=None, **kwargs):  # <= 5.23 Mamba family
    return input_ids


def _new(input_ids, cache=None, use_cache=None, **kwargs):  # 5.24: one name for every model
    return input_ids


def _deprecated(fn):
    """What transformers' deprecate_kwarg does to the signature: a wrapper that keeps ``__wrapped__``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@pytest.mark.parametrize("forward, name", [(_old_attention, "past_key_values"), (_old_mamba, "cache_params"),
                                           (_new, "cache"), (_deprecated(_new), "cache")])
def test_cache_argument_old_and_new_names(forward, name):
    assert cache_argument(forward) == name


def test_cache_argument_missing_is_an_error_naming_the_release():
    def forward(input_ids, state=None, **kwargs):
        return input_ids

    with pytest.raises(LibraryChanged, match=rf"transformers {VERSION}: LlamaForCausalLM.forward takes none of "
                                             r"cache, past_key_values, cache_params"):
        cache_argument(forward, "LlamaForCausalLM")


def test_installed_release_cache_argument_of_real_classes():
    """The installed release's real forward signatures: 5.24 renamed both old names to ``cache``."""
    from transformers import LlamaForCausalLM, MambaForCausalLM

    new = tuple(int(p) for p in VERSION.split(".")[:2]) >= (5, 24)
    assert cache_argument(LlamaForCausalLM.forward) == ("cache" if new else "past_key_values")
    assert cache_argument(MambaForCausalLM.forward) == ("cache" if new else "cache_params")


# -- missing pieces are errors, never an empty layout ----------------------------------------------------------

def test_missing_state_layer_class_is_an_error(monkeypatch):
    from transformers import cache_utils

    monkeypatch.delattr(cache_utils, "LinearAttentionCacheLayerMixin")
    with pytest.raises(LibraryChanged, match=rf"transformers {VERSION}: "
                                             r"transformers.cache_utils.LinearAttentionCacheLayerMixin is missing"):
        hf_source(MAMBA, name="tiny-mamba")


def test_cache_argument_the_model_ignores_is_an_error(monkeypatch):
    """transformers 5.24's failure: the cache was passed under a name the forward swallowed in **kwargs, the model
    built its own cache, and no recurrent state reached graphroof (was: a note and a 22.8 GB 'KV cache')."""
    monkeypatch.setattr(hf_compat, "cache_argument", lambda forward, name="": "unused_cache_kwarg")
    src = hf_source(MAMBA, name="tiny-mamba")
    assert isinstance(src, SSMSource)
    with pytest.raises(LibraryChanged, match="handed no recurrent state to the cache's state layers"):
        src.state_layout()


def test_renamed_scan_function_is_an_error(monkeypatch):
    """A release whose Mamba module calls its scan under another name: the prefill would be traced as the per-token
    Python loop (a different, huge graph) - an error instead."""
    from graphroof.frontends.hf import ssm_kernels as ssm

    monkeypatch.setattr(ssm, "_SWAPS", {k: v for k, v in ssm._SWAPS.items() if k != "mamba_selective_scan"})
    src = hf_source(MAMBA, name="tiny-mamba")
    with pytest.raises(LibraryChanged, match=r"the prefill \(batch 1, prompt 4\) ran none of graphroof.selective_scan"):
        src.prefill_graph(1, 4)


def test_renamed_state_update_is_an_error(monkeypatch):
    from graphroof.frontends.hf import ssm_kernels as ssm

    monkeypatch.setattr(ssm, "_SWAPS", {k: v for k, v in ssm._SWAPS.items()
                                        if k not in ("mamba_selective_state_update", "causal_conv1d_update")})
    src = hf_source(MAMBA, name="tiny-mamba")
    with pytest.raises(LibraryChanged, match="ran none of graphroof.selective_state_update"):
        src.decode_graph(1, 8)


def test_missing_packed_sequence_check_is_an_error(monkeypatch):
    from transformers import masking_utils

    from graphroof.frontends.hf.build import load_config_data

    monkeypatch.delattr(masking_utils, "find_packed_sequence_indices")
    with pytest.raises(LibraryChanged, match="masking_utils.find_packed_sequence_indices is missing"):
        load_config_data({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                          "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 128}, seq=8)


def test_missing_state_layer_attribute_is_an_error(monkeypatch):
    """A recurrent-state cache layer without an attribute graphroof fills (e.g. ``conv_states`` renamed)."""
    from transformers import cache_utils

    init = cache_utils.LinearAttentionLayer.__init__

    def renamed(self, *args, **kwargs):  # a release that calls the attribute `conv_state_by_index`
        init(self, *args, **kwargs)
        self.conv_state_by_index = self.__dict__.pop("conv_states")

    monkeypatch.setattr(cache_utils.LinearAttentionLayer, "__init__", renamed)
    src = hf_source(MAMBA, name="tiny-mamba")
    with pytest.raises(LibraryChanged, match=r"a recurrent-state cache layer \(transformers.cache_utils."
                                             r"LinearAttentionLayer\) has no conv_states"):
        src.state_layout()


# -- a transformers module passed directly is traced as its config is -----------------------------------------

def test_hf_module_with_use_cache_off_counts_the_causal_half():
    """A meta LlamaForCausalLM with ``use_cache=False``: transformers 5.24 runs its packed-sequence check (a
    value read) on that path; graphroof turns it off for modules as for configs, so attention is the causal half.

    hidden 64, 4 heads of 16 (2 KV heads), FFN 128, vocab 128, 2 layers, 16 tokens; matrix FLOPs = 2 x MACs:
    per layer q 2*16*64*64 = 131,072; k, v 2*16*64*32 = 65,536 each; o 131,072; gate + up 2*2*16*64*128 =
    524,288; down 262,144 -> 1,179,648; x 2 layers = 2,359,296; lm_head 2*16*64*128 = 262,144;
    attention: (query, key) pairs of the causal half 16*17/2 = 136, QK^T and PV 2 * 2 * 136 * 16 = 8,704 per head,
    x 4 heads x 2 layers = 69,632.  Total 2,691,072."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    ids = torch.zeros(1, 16, dtype=torch.long, device="meta")
    for kw in ({"use_cache": False}, {"use_cache": True}):
        r = graphroof.analyze(model, {"input_ids": ids, **kw}, hw="h100")
        assert r.totals.cost.matrix_flops == 2_691_072, kw


def test_mla_model_without_mla_modules_is_an_error(monkeypatch):
    """A DeepSeek config (kv_lora_rank) whose attention modules no longer look like transformers' MLA (here:
    expand_kv renamed): decode would silently re-expand the whole cache every step; an error instead."""
    from graphroof.frontends.hf.source import HFSource
    from tests.llm.test_llm_windows import DEEPSEEK_V2

    src = HFSource(DEEPSEEK_V2, name="tiny-deepseek-v2")
    for m in src.model.modules():
        if hasattr(type(m), "expand_kv"):
            monkeypatch.delattr(type(m), "expand_kv")
    with pytest.raises(LibraryChanged, match="has kv_lora_rank but no attention module with kv_b_proj, expand_kv"):
        src.decode_graph(1, 8)


def test_missing_attention_registry_is_an_error(monkeypatch):
    from transformers import modeling_utils

    from graphroof.frontends.hf.source import HFSource
    from tests.llm.test_llm_windows import DEEPSEEK_V2

    src = HFSource(DEEPSEEK_V2, name="tiny-deepseek-v2")
    src.kv_layout()
    monkeypatch.setattr(modeling_utils, "ALL_ATTENTION_FUNCTIONS", object())  # a release that moved it
    with pytest.raises(LibraryChanged, match="ALL_ATTENTION_FUNCTIONS.get_interface is missing"):
        src.decode_graph(1, 8)
