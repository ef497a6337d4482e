"""Module bodies that cannot block or spin, told from their bytecode before they run.

A module body runs in the loader's worker thread so that one that blocks or spins leaves the
event loop serving (see :class:`~hotseam.reload._guard.Worker`). Handing it there and back
is two wake-ups of a sleeping thread: a few hundredths of a millisecond on an idle machine,
milliseconds on a busy one, where each wake-up waits for the scheduler (and for the
interpreter lock). Most of a save's time on a loaded machine was those two waits.

A body whose code *cannot* run anything but itself needs no thread: :func:`inert` reads the
compiled code and says yes only for straight-line code (no backward jump, so no loop) that
calls nothing (the one call allowed is ``class X:`` without bases or decorators, whose own
body is held to the same rule, attributes included) and imports only what is already
imported (every module of the dotted name in ``sys.modules`` or serving, every name it takes
already there: an import that would execute a module, read a file or reach a module's
``__getattr__`` says no). Such a body ends after at most as many steps as it has
instructions, so the loader executes it on the event loop's thread, at once. Anything else
(a decorator, a call, a loop, a new import, an unknown instruction) still goes to the
thread with its time bound, as before. It is a conservative test: a no costs a thread hop,
never a guarantee.
"""

from __future__ import annotations

import dis
import sys
from collections.abc import Callable, Sequence
from types import CodeType, ModuleType

__all__ = ["Resolve", "inert"]

Resolve = Callable[[str, "tuple[str, ...] | None", int], "ModuleType | None"]
"""``resolve(name, fromlist, level)``: the module ``IMPORT_NAME`` would return without
running any code (``None``: it might run some)."""

_OP = dis.opmap
_CACHE = _OP.get("CACHE", 0)
_EXTENDED_ARG = _OP["EXTENDED_ARG"]
_HAVE_ARGUMENT = dis.HAVE_ARGUMENT


def _ops(*names: str) -> frozenset[int]:
    return frozenset(_OP[name] for name in names if name in _OP)


# Instructions that touch nothing but the frame's stack, its namespace (a plain dict) and
# fresh objects: none of them can run code of anyone else.
_PLAIN = _ops(
    "NOP",
    "RESUME",
    "POP_TOP",
    "COPY",
    "SWAP",
    "LOAD_CONST",
    "STORE_NAME",
    "RETURN_VALUE",
    "RETURN_CONST",
    "BUILD_TUPLE",
    "BUILD_LIST",
    "MAKE_CELL",
    "LOAD_CLOSURE",
    "COPY_FREE_VARS",
    "PUSH_NULL",
)
_LOAD_NAME = _OP["LOAD_NAME"]
_LOAD_CONST = _OP["LOAD_CONST"]
_MAKE_FUNCTION = _OP["MAKE_FUNCTION"]
_LOAD_BUILD_CLASS = _OP["LOAD_BUILD_CLASS"]
_PRECALL = _OP.get("PRECALL", -1)
_CALL = _OP["CALL"]
_IMPORT_NAME = _OP["IMPORT_NAME"]
_IMPORT_FROM = _OP["IMPORT_FROM"]
_SETUP_ANNOTATIONS = _OP["SETUP_ANNOTATIONS"]
_STORE_SUBSCR = _OP["STORE_SUBSCR"]
_STORE_NAME = _OP["STORE_NAME"]
_LOAD_ATTR = _OP["LOAD_ATTR"]
_ATTR_SHIFT = 1 if sys.version_info >= (3, 12) else 0  # 3.12 packs a method flag in
_LIST_EXTEND = _OP["LIST_EXTEND"]
_BUILD_CONST_KEY_MAP = _OP.get("BUILD_CONST_KEY_MAP", -1)
_MAX_INSTRUCTIONS = 20_000
"""A longer body goes to the thread: its steps are bounded, but not by little."""


def _instructions(code: CodeType) -> list[tuple[int, int]]:
    """``(opcode, argument)`` pairs of ``code``, inline caches skipped (``dis`` builds an
    object per instruction: fifty times slower, and this runs once per save)."""
    raw = code.co_code
    result: list[tuple[int, int]] = []
    extended = 0
    for offset in range(0, len(raw), 2):
        op = raw[offset]
        if op == _CACHE:
            continue
        arg = raw[offset + 1] | extended if op >= _HAVE_ARGUMENT else 0
        if op == _EXTENDED_ARG:
            extended = arg << 8
            continue
        extended = 0
        result.append((op, arg))
    return result


def _plain_module(value: object) -> ModuleType | None:
    """``value`` if it is a module whose attributes are read from its ``__dict__`` alone."""
    if type(value) is not ModuleType:
        return None
    return value


def inert(code: CodeType, resolve: Resolve, *, class_body: bool = False) -> bool:
    """True when executing ``code`` (a module body, or a class body inside one) can run no
    code but its own, and so ends within its length: see the module's docstring."""
    ops = _instructions(code)
    if len(ops) > _MAX_INSTRUCTIONS:
        return False
    consts: Sequence[object] = code.co_consts
    names = code.co_names
    imported: ModuleType | None = None  # the module the last IMPORT_NAME pushed
    chain: list[str] = []  # the rest of a dotted ``import a.b as c``, taken by IMPORT_FROM
    modules: dict[str, ModuleType] = {}  # names this body bound to a plain module
    pushed: ModuleType | None = None  # the plain module the last instruction pushed
    for index, (op, arg) in enumerate(ops):
        produced, pushed = pushed, None
        if op == _STORE_NAME:
            if names[arg] == "__annotations__":
                return False  # annotations would then be stored into whatever this is
            if produced is not None:
                modules[names[arg]] = produced
            else:
                modules.pop(names[arg], None)
            continue
        if op in _PLAIN:
            continue
        if op == _LOAD_ATTR:
            # ``helper.VALUE`` (``os.path.sep``) of a module this body imported, the name
            # in its __dict__: a dict lookup (a missing one would reach __getattr__).
            owner = produced
            attribute = names[arg >> _ATTR_SHIFT]
            if class_body or owner is None or attribute not in owner.__dict__:
                return False
            pushed = _plain_module(owner.__dict__[attribute])
            continue
        if op == _LOAD_NAME:
            pushed = modules.get(names[arg])
            # A class body may read only ``__name__`` (its prologue): a value it stored
            # could have a ``__set_name__`` that ``type()`` calls.
            if class_body and names[arg] != "__name__":
                return False
            continue
        if op == _MAKE_FUNCTION:
            continue  # defaults, annotations and closures are values already on the stack
        if op == _LOAD_BUILD_CLASS:
            if not _class_statement(ops, index, consts, resolve):
                return False
            continue
        if op in (_PRECALL, _CALL):
            # Only the call of ``__build_class__`` that _class_statement checked.
            if not _builds_class(ops, index if op == _CALL else index + 1):
                return False
            continue
        if op == _SETUP_ANNOTATIONS:
            continue
        if op in (_LIST_EXTEND, _BUILD_CONST_KEY_MAP):
            # ``["a", "b"]`` extends a list by a constant tuple; keyword defaults build a
            # dict from a constant tuple of names: iterating a tuple, hashing a str.
            if index < 1 or ops[index - 1][0] != _LOAD_CONST:
                return False
            keys = consts[ops[index - 1][1]]
            if not isinstance(keys, tuple) or (
                op == _BUILD_CONST_KEY_MAP and not all(type(key) is str for key in keys)
            ):
                return False
            continue
        if op == _STORE_SUBSCR:
            # ``x: T = v`` stores T in ``__annotations__['x']`` (a dict, a str key).
            if (
                index < 2
                or "__annotations__" not in names
                or ops[index - 2] != (_LOAD_NAME, names.index("__annotations__"))
            ):
                return False
            if ops[index - 1][0] != _LOAD_CONST or not isinstance(consts[ops[index - 1][1]], str):
                return False
            continue
        if op == _IMPORT_NAME:
            if class_body or index < 2:
                return False
            (level_op, level), (from_op, from_arg) = ops[index - 2], ops[index - 1]
            if level_op != _LOAD_CONST or from_op != _LOAD_CONST:
                return False
            level_value, fromlist = consts[level], consts[from_arg]
            if not isinstance(level_value, int) or not (
                fromlist is None
                or (isinstance(fromlist, tuple) and all(isinstance(i, str) for i in fromlist))
            ):
                return False
            if fromlist is not None and "*" in fromlist:
                return False
            imported = _plain_module(resolve(names[arg], fromlist, level_value))
            if imported is None:
                return False
            chain = names[arg].split(".")[1:] if fromlist is None else []
            pushed = imported if not chain else None
            continue
        if op == _IMPORT_FROM:
            if imported is None:
                return False
            attribute = names[arg]
            if chain:
                # ``import a.b.c as d``: IMPORT_FROM b, then c, each from the one before.
                if chain[0] != attribute:
                    return False
                chain.pop(0)
                value = imported.__dict__.get(attribute)
                following = _plain_module(value)
                if following is None:
                    return False
                imported = pushed = following
                continue
            if attribute not in imported.__dict__:
                return False
            pushed = _plain_module(imported.__dict__[attribute])
            continue
        return False  # a call, a loop, an attribute, an operator... or unknown: the thread
    return True


def _class_statement(
    ops: Sequence[tuple[int, int]], index: int, consts: Sequence[object], resolve: Resolve
) -> bool:
    """``class X:`` with no bases, keywords or decorators, whose body is inert too."""
    if not _builds_class(ops, _call_after(ops, index)):
        return False
    body = consts[ops[index + 1][1]]
    return isinstance(body, CodeType) and inert(body, resolve, class_body=True)


def _call_after(ops: Sequence[tuple[int, int]], index: int) -> int:
    """Where the CALL of the ``__build_class__`` loaded at ``index`` should be."""
    position = index + 4
    if position < len(ops) and ops[position][0] == _PRECALL:
        position += 1
    return position


def _builds_class(ops: Sequence[tuple[int, int]], call: int) -> bool:
    """True when ``ops[call]`` is ``CALL 2`` right after ``LOAD_BUILD_CLASS, LOAD_CONST
    <code>, MAKE_FUNCTION 0, LOAD_CONST <name>`` (and a ``PRECALL 2`` where there is one)."""
    if call >= len(ops) or ops[call] != (_CALL, 2):
        return False
    start = call - 4
    if ops[call - 1][0] == _PRECALL:
        if ops[call - 1][1] != 2:
            return False
        start -= 1
    if start < 0:
        return False
    build, body, function, name = ops[start : start + 4]
    return (
        build[0] == _LOAD_BUILD_CLASS
        and body[0] == _LOAD_CONST
        and function == (_MAKE_FUNCTION, 0)
        and name[0] == _LOAD_CONST
    )
