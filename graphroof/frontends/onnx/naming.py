"""ONNX node naming: op keys, KV-cache tensor names, the module scope of a node and its label in the reports
(plain string rules over a node's name, its exporter metadata and the tensors it reads / makes)."""

from __future__ import annotations

import ast
import re

import onnx

__all__ = ["is_kv_name", "op_key", "scope_of", "own_scope", "weight_scope", "path_scope", "node_label"]

_KV_RE = re.compile(r"past|present|key_cache|value_cache|kv_cache|cache_k|cache_v|key_values", re.I)
_NOT_KV_RE = re.compile(r"length|position|seqlen|seq_len|mask|step|index|indices", re.I)


def is_kv_name(name: str) -> bool:
    """True for tensor names of a KV cache (``past_key_values.3.value``, ``present.0.key``, ``cache_k``)."""
    return bool(_KV_RE.search(name)) and not _NOT_KV_RE.search(name)


def op_key(node: onnx.NodeProto) -> str:
    """``onnx.MatMul`` for the default domain, ``com.microsoft.GroupQueryAttention`` for others."""
    dom = node.domain
    return f"onnx.{node.op_type}" if dom in ("", "ai.onnx") else f"{dom}.{node.op_type}"


def own_scope(node: onnx.NodeProto) -> str | None:
    """The module path *node* states (``""``: the root module), or ``None`` when it states nothing."""
    meta = {p.key: p.value for p in node.metadata_props} if node.metadata_props else {}
    scopes = meta.get("pkg.torch.onnx.name_scopes")
    if scopes:
        try:
            parts = ast.literal_eval(scopes)
            if isinstance(parts, list):  # [..., module path, op name]; "_empty_nn_module_stack..." = none
                mod = str(parts[-2]) if len(parts) >= 2 else ""
                return None if mod.startswith("_") else mod
        except (ValueError, SyntaxError):
            pass
    ns = meta.get("namespace")
    if ns:  # ": pkg.Model/layers.0: pkg.Block/layers.0.fc1: torch.nn.Linear/linear: aten.linear.default"
        mods = [seg.split(":")[0].strip() for seg in ns.split("/")]
        mods = [m for m in mods[:-1] if m]
        return mods[-1] if mods else ""
    parts = [p for p in node.name.split("/") if p]
    if node.name.startswith("/") or len(parts) > 1:  # "/model/layers.0/mlp/up_proj/MatMul", "/Relu"
        return ".".join(parts[:-1])
    return None


def scope_of(node: onnx.NodeProto) -> str:
    """The module path of *node* from exporter metadata or its name (``""`` when neither says)."""
    return own_scope(node) or ""


_WEIGHT_SUFFIX = re.compile(r"\.(weight|bias|scale|scales|zero_points?|qweight|g_idx|[A-Za-z]*_(weight|bias))$")


def weight_scope(name: str) -> str:
    """``model.layers.0.mlp.up_proj.weight`` -> ``model.layers.0.mlp.up_proj``; other names -> ``""``."""
    if "." not in name or "/" in name or not _WEIGHT_SUFFIX.search(name):
        return ""
    return name.rsplit(".", 1)[0]


_GENERIC_NODE = re.compile(r"^(n|node_?)?\d+$")
_OUTPUT_SUFFIX = re.compile(r"_output_\d+$")
_OPAQUE_TENSOR = re.compile(r"^(onnx::.*|[A-Za-z_]*[.:_]?\d+)$")


def path_scope(tensor: str) -> str | None:
    """``/model/layers.0/mlp/up_proj/MatMul_output_0`` -> ``model.layers.0.mlp.up_proj`` (a tensor named after the
    node that made it, as torch's exporter names them); other names -> ``None``."""
    parts = [p for p in tensor.split("/") if p]
    if not tensor.startswith("/") or len(parts) < 2:
        return None
    return ".".join(parts[:-1])


def node_label(node: onnx.NodeProto, index: int, weight_scope: str = "") -> str:
    """The op's name in the graph and the reports: the node's own name; for an unnamed node (or an exporter's
    generic ``n143``) the name of the tensor it makes when that says where it is
    (``model/layers.0/mlp/up_proj/MatMul``), else ``<module of its weight>/<op type>``
    (``layer1.0.conv1/Conv``), else ``<output tensor>/<op type>``, else ``<op type>_<index>``."""
    if node.name and not _GENERIC_NODE.match(node.name):
        return node.name
    out = next((o for o in node.output if o), "")
    if path_scope(out) is not None:
        return _OUTPUT_SUFFIX.sub("", out.lstrip("/"))
    if weight_scope:
        return f"{weight_scope}/{node.op_type}"
    if out and not _OPAQUE_TENSOR.match(out):
        return f"{out}/{node.op_type}"
    return node.name or f"{node.op_type}_{index}"
