"""The transformers frontend: a ``config.json`` (zoo entry, file, folder or Hugging Face model id) built on the meta
device and traced (:mod:`.build`), and the LLM sources traced with a KV cache (:mod:`.source`, state-space
:mod:`.ssm_source`, encoder-decoders :mod:`.encdec`, latent attention :mod:`.mla`).

Importing this package does not import torch or transformers: :mod:`.config` (reading a config and its facts),
:mod:`.hub` (a Hugging Face config fetched alone) and :mod:`.limits` (plausibility checks) are library-free.
"""

from .config import read_config, spec_from_config

__all__ = ["read_config", "spec_from_config"]
