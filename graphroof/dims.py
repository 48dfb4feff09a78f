"""Symbolic dims: a shape entry is an ``int`` or a ``str``, a name (``"seq"``) or integer arithmetic over names
(``"past + 1"``, ``"ceil(seq / 64)"``, ``"max(a, b)"``); :func:`resolve_dim` evaluates one against bound values
(parsed with :mod:`ast`, never executed)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping

from .errors import UnboundDimError

__all__ = ["Dim", "MAX_DIM_TEXT", "resolve_dim"]

Dim = int | str


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod}


def _eval_dim(expr: ast.AST, dims: Mapping[str, int], text: str) -> int:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id in dims:
            return int(dims[expr.id])
        raise UnboundDimError(expr.id)
    if isinstance(expr, ast.BinOp) and type(expr.op) in _BINOPS:
        left, right = _eval_dim(expr.left, dims, text), _eval_dim(expr.right, dims, text)
        if right == 0 and type(expr.op) in (ast.FloorDiv, ast.Div, ast.Mod):
            raise UnboundDimError(text, "divides by zero once its dims are bound; check --dim / --input values")
        return _BINOPS[type(expr.op)](left, right)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        v = _eval_dim(expr.operand, dims, text)
        return -v if isinstance(expr.op, ast.USub) else v
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.keywords \
            and expr.func.id in ("max", "min", "ceil", "floor"):
        if expr.func.id == "ceil" and len(expr.args) == 1 and isinstance(expr.args[0], ast.BinOp) \
                and type(expr.args[0].op) in (ast.Div, ast.FloorDiv):  # ceil(a / b): round up
            num = _eval_dim(expr.args[0].left, dims, text)
            den = _eval_dim(expr.args[0].right, dims, text)
            if den == 0:
                raise UnboundDimError(text, "divides by zero once its dims are bound; check --dim / --input values")
            return -(-num // den)
        args = [_eval_dim(a, dims, text) for a in expr.args]
        if expr.func.id in ("max", "min") and len(args) >= 2:
            return {"max": max, "min": min}[expr.func.id](args)
        if expr.func.id in ("ceil", "floor") and len(args) == 1:
            return args[0]  # integer arithmetic: already whole
    raise UnboundDimError(text, "cannot evaluate this symbolic dimension; set it with --dim or --input")


#: Longest symbolic dim expression evaluated (exporters write at most a few hundred characters).
MAX_DIM_TEXT = 2000


def resolve_dim(d: Dim, dims: Mapping[str, int] | None = None) -> int:
    """Return *d* as an int, evaluating a symbolic dim against *dims*.

    >>> resolve_dim("seq + past", {"seq": 1, "past": 7})
    8
    """
    if isinstance(d, int):
        return d
    dims = dims or {}
    if d in dims:
        return int(dims[d])
    if len(d) > MAX_DIM_TEXT:
        raise UnboundDimError(d[:60] + "...", f"a symbolic dimension longer than {MAX_DIM_TEXT} characters")
    try:
        expr = ast.parse(d.replace("//", "/"), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise UnboundDimError(d) from None
    try:
        return _eval_dim(expr, dims, d)
    except RecursionError:
        raise UnboundDimError(d[:60], "nested too deeply to evaluate") from None
