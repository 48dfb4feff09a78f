"""Reading an ONNX file: a clear one-line error for what is not a model (a folder, an empty or text file, a Git LFS
pointer, a truncated protobuf) or is newer than the installed onnx reads; weights are never loaded."""

from __future__ import annotations

from pathlib import Path

import onnx

from ...errors import FrontendError, InputError

__all__ = ["read_model", "check_versions"]


def read_model(path: Path) -> onnx.ModelProto:
    if path.is_dir():
        raise InputError(f"{path} is a directory, not an ONNX file; pass the .onnx file inside it")
    if not path.is_file():
        raise InputError(f"model file {str(path)!r} not found; check the path")
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    if not head:
        raise FrontendError(f"{path} is empty (0 bytes); re-export or re-download the model")
    if head.startswith(b"version https://git-lfs"):
        raise FrontendError(f"{path} is a Git LFS pointer, not the model; fetch it with `git lfs pull`")
    if _looks_like_text(head):
        raise FrontendError(f"{path} is a text file, not a binary ONNX model (protobuf); export the model with "
                            "torch.onnx.export or onnx.save")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # google.protobuf DecodeError, RuntimeError from the C++ parser
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FrontendError(f"{path} is not a readable ONNX model (truncated or not an ONNX protobuf: {msg}); "
                            "re-export or re-download it") from None
    if model.ir_version == 0 or not model.HasField("graph") or not model.opset_import:
        raise FrontendError(f"{path} is not a complete ONNX model (no ir_version, graph or opset_import: truncated "
                            "or another protobuf); re-export or re-download it")
    return model


def _looks_like_text(head: bytes) -> bool:
    """True when the first bytes are printable UTF-8 (a binary protobuf has control bytes early on)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # only a multi-byte character cut at the end of the chunk is allowed
            return False
        text = head[:e.start].decode("utf-8")
    return all(c.isprintable() or c in "\n\r\t" for c in text)


def check_versions(model: onnx.ModelProto, path: Path) -> int:
    known = onnx.defs.onnx_opset_version()
    opset = 0
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    if opset > known:
        raise FrontendError(f"{path} uses ONNX opset {opset}, newer than the installed onnx {onnx.__version__} knows "
                            f"(up to {known}); upgrade it: pip install -U onnx")
    if model.ir_version > onnx.IR_VERSION:
        raise FrontendError(f"{path} has ONNX IR version {model.ir_version}, newer than the installed onnx "
                            f"{onnx.__version__} reads (up to {onnx.IR_VERSION}); upgrade it: pip install -U onnx")
    return opset
