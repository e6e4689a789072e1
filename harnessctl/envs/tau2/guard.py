"""Bounds on tau2's tools whose arguments run as code on the host.

tau2's domain environments run in the harnessctl process, and a tool's arguments come from
the model (untrusted). ``calculate`` (airline, retail) checks the characters of its
expression and then ``eval``s it: ``9**9**9`` passes the check and computes a number of 370
million digits, holding the interpreter lock for minutes, every thread of the host stalled
and no timeout able to fire. This module refuses such an argument before tau2 sees it, with
the ``ValueError`` tau2's own tools raise for a bad expression, so the conversation records
an ordinary tool error and the rollout goes on.

The check evaluates the expression's syntax tree as Python would (left to right, the same
operators), with every integer operation's result size bounded *before* it is computed:
``a ** b`` and ``a * b`` whose result would exceed :data:`MAX_INT_BITS` bits are refused.
Float arithmetic is bounded by the hardware (it overflows at once). Whatever the check
passes, tau2's ``eval`` computes with numbers of at most that size; whatever it cannot read
(a syntax error, a name) it leaves to tau2, whose ``eval`` fails at once. Results for
expressions within bounds are tau2's own, unchanged.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable
from typing import Any

MAX_INT_BITS = 10_000
"""The largest integer a ``calculate`` expression may build (about 3,000 digits; a price
is a few)."""
MAX_EXPRESSION_CHARS = 4_000
"""The longest expression passed on (parsing cost is linear, but a bound is a bound)."""

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class _LeftToTau2(Exception):
    """Evaluation stops here as ``eval`` would (an error it raises at once): pass it on."""


def check_expression(expression: str) -> None:
    """``ValueError`` when evaluating ``expression`` would build an integer above
    :data:`MAX_INT_BITS` bits or the expression is longer than :data:`MAX_EXPRESSION_CHARS`."""
    if not isinstance(expression, str):
        return  # tau2's own check refuses it
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"Expression too long (over {MAX_EXPRESSION_CHARS} characters)")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # eval fails the same way, at once
    try:
        _value(tree.body)
    except _LeftToTau2:
        return


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _apply(_UNARY[type(node.op)], _value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(left, int) and isinstance(right, int):
            _refuse_large(type(node.op), left, right)
        return _apply(_BINARY[type(node.op)], left, right)
    raise _LeftToTau2  # a name, a tuple, a call...: eval raises at once


def _apply(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        value = fn(*args)
    except (ArithmeticError, TypeError, ValueError):
        raise _LeftToTau2 from None
    if isinstance(value, complex):
        raise _LeftToTau2  # float() of it fails in tau2
    return value


def _refuse_large(op: type, a: int, b: int) -> None:
    bits = abs(a).bit_length()
    if op is ast.Pow and b > 0 and abs(a) > 1 and (bits - 1) * b > MAX_INT_BITS:
        raise ValueError("Expression result too large")
    if op is ast.Mult and bits + abs(b).bit_length() > MAX_INT_BITS + 1:
        raise ValueError("Expression result too large")


GUARDS: dict[str, Callable[..., None]] = {
    "calculate": lambda expression="", **_: check_expression(expression)
}
"""Tool name -> a check of its arguments that raises ``ValueError`` before tau2 runs it."""


def guard_tools(environment: Any) -> Any:
    """Wrap the guarded tools of ``environment``'s toolkits (agent and user) with their
    checks; the wrapped tool keeps its name, signature and docstring (tau2 builds the tool's
    schema from them)."""
    for toolkit in (getattr(environment, "tools", None), getattr(environment, "user_tools", None)):
        if toolkit is None:
            continue
        for name, check in GUARDS.items():
            tool = getattr(toolkit, name, None)
            if tool is None or getattr(tool, "__hx_guarded__", False):
                continue
            setattr(toolkit, name, _guarded(tool, check))
    return environment


def _guarded(tool: Callable[..., Any], check: Callable[..., None]) -> Callable[..., Any]:
    @functools.wraps(tool)
    def run(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return tool(*args, **kwargs)

    run.__hx_guarded__ = True  # type: ignore[attr-defined]
    return run
