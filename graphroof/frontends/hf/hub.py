"""Hugging Face model ids (``meta-llama/Llama-3.1-8B``, ``Qwen/Qwen2.5-7B``): their ``config.json``, never weights.

The config comes from the local Hugging Face cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
``~/.cache/huggingface/hub``: the ``models--org--name/snapshots/<rev>/config.json`` layout that
``huggingface_hub`` and transformers write) through :func:`huggingface_hub.try_to_load_from_cache`; when it is not
there and the hub may be used (``HF_HUB_OFFLINE`` unset), :func:`huggingface_hub.hf_hub_download` fetches
``config.json`` alone into that cache.  Offline and not cached, gated, missing: one-line errors saying what to do.

:func:`graphroof.frontends.resolve.classify` sends here a string ``org/name`` that is not an existing path (a
local path always wins; ``pkg.module:factory`` stays a factory).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from ...errors import FrontendError, InputError, sanitize_terminal

__all__ = ["is_repo_id", "config_path", "cache_dir", "offline"]

#: ``org/name`` as the hub spells repository ids (letters, digits, ``-``, ``_``, ``.``; at most 96 per part).
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
_TRUE = ("1", "on", "yes", "true")


def is_repo_id(text: str) -> bool:
    """True for a string shaped like a hub model id (``org/name``; no ``..``, not ending in ``.``)."""
    return bool(_REPO_ID.match(text)) and ".." not in text and not text.endswith(".") and "--" not in text


def cache_dir() -> Path | None:
    """The hub cache this process uses, read from the environment now (``None``: huggingface_hub's default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return None


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or transformers' ``TRANSFORMERS_OFFLINE``) set: the hub is never contacted."""
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def config_path(repo_id: str) -> Path:
    """The local path of *repo_id*'s ``config.json`` (fetched alone when online and not cached)."""
    return _config_path(repo_id, cache_dir(), offline())


@functools.lru_cache(maxsize=64)
def _config_path(repo_id: str, cache: Path | None, is_offline: bool) -> Path:
    try:
        import huggingface_hub as hub
        from huggingface_hub import errors
    except ModuleNotFoundError:
        raise FrontendError(f"{repo_id} looks like a Hugging Face model id: reading it needs huggingface_hub "
                            "(pip install 'graphroof[hf]'); or pass the path of its config.json") from None
    shown = sanitize_terminal(repo_id)
    where = str(cache) if cache is not None else "the default Hugging Face cache (~/.cache/huggingface/hub)"
    try:
        found = hub.try_to_load_from_cache(repo_id, "config.json", cache_dir=cache)
    except (errors.HFValidationError, ValueError):
        raise InputError(f"{shown!r} is neither a local path nor a valid Hugging Face model id; check the "
                         "spelling (graphroof zoo list shows the bundled names)") from None
    if isinstance(found, str):
        return Path(found)
    get = (f"run `hf download {shown} config.json` where the hub is reachable (with the same HF_HOME / "
           "HF_HUB_CACHE), or pass the path of a config.json")
    if is_offline:
        raise InputError(f"{shown}: no config.json for it in {where}, and HF_HUB_OFFLINE=1 forbids fetching it; "
                         f"unset HF_HUB_OFFLINE, or {get} (if you meant a local path: it does not exist)")
    if not _reachable(hub.constants.ENDPOINT):  # else huggingface_hub retries for ~30 s, logging each try
        raise InputError(f"{shown}: no config.json for it in {where}, and the hub ({hub.constants.ENDPOINT}) cannot "
                         f"be reached (no network); {get}")
    import logging

    log = logging.getLogger("huggingface_hub")
    level = log.level
    log.setLevel(logging.ERROR)  # its retry notices are not graphroof's one-line output
    try:
        return Path(hub.hf_hub_download(repo_id, "config.json", cache_dir=cache))
    except errors.GatedRepoError:
        raise InputError(f"{shown} is a gated model: accept its license on huggingface.co, then log in (`hf auth "
                         "login` or HF_TOKEN) and run again; only its config.json is fetched") from None
    except errors.RepositoryNotFoundError:
        raise InputError(f"{shown}: no such model on the Hugging Face hub (or it is private: log in with `hf auth "
                         "login` or set HF_TOKEN); if you meant a local path, it does not exist") from None
    except errors.RevisionNotFoundError:
        raise InputError(f"{shown}: its main revision was not found on the hub") from None
    except errors.LocalEntryNotFoundError:
        raise InputError(f"{shown}: no config.json for it in {where}, and the hub cannot be reached (no network); "
                         f"{get}") from None
    except errors.EntryNotFoundError:
        raise InputError(f"{shown} has no config.json (not a transformers model?); pass an .onnx file or "
                         "'pkg.module:factory' instead") from None
    except (errors.HfHubHTTPError, OSError) as e:
        raise InputError(f"{shown}: fetching config.json from the hub failed ({sanitize_terminal(str(e))[:120]}); "
                         f"{get}") from None
    finally:
        log.setLevel(level)


def _reachable(endpoint: str, timeout_s: float = 5.0) -> bool:
    """Whether a TCP connection to the hub's host opens within *timeout_s* (no request is sent)."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(endpoint)
    if not url.hostname:
        return False
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                      timeout=timeout_s):
            return True
    except OSError:
        return False
