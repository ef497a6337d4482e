"""Zombie generations: a generation whose scope closed but whose code is still reachable
(what is reported: ``docs/testing.md``, "Zombie generations").

The shortest reference chain from a *root* (a module in ``sys.modules``, another thread's
frame) is found with one breadth-first walk of ``gc.get_referents`` (walking
``gc.get_referrers`` back from the zombie would scan the heap at each step), and said in
words; when ``tracemalloc`` traces, with the line that handed the reference out. Only run
when something is found alive, so a clean test pays one ``gc.collect()``."""

from __future__ import annotations

import collections
import gc
import linecache
import os
import sys
import threading
import tracemalloc
import types
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ._sites import is_library

_ATOMIC = (str, bytes, int, float, bool, type(None), complex)
_MAX_CHAIN = 40
_KIT = "hotseam.testing"


class Generation:
    """Weak references to what one generation of a module defined: the module, and the
    functions and classes of its own (they hold its globals alive even without it)."""

    def __init__(self, module: types.ModuleType, generation: int) -> None:
        self.name = module.__name__
        self.path: str | None = getattr(module, "__file__", None)
        self.file = Path(self.path or self.name).name
        self.generation = generation
        self.label = f"{self.file} generation {generation}"
        self._refs: list[tuple[weakref.ref[object], str]] = [
            (weakref.ref(module), f"the module of {self.label}")
        ]
        for attribute, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType | type) and (
                getattr(value, "__module__", None) == self.name
            ):
                kind = "class" if isinstance(value, type) else "function"
                self._refs.append((weakref.ref(value), f"the {kind} {attribute} of {self.label}"))

    def alive(self) -> list[tuple[object, str]]:
        """What of the generation is still alive, with its label."""
        found: list[tuple[object, str]] = []
        for ref, label in self._refs:
            obj = ref()
            if obj is not None:
                found.append((obj, label))
        for obj, _label in list(found):
            namespace = getattr(obj, "__globals__", None)
            if namespace is not None and all(id(o) != id(namespace) for o, _ in found):
                found.append((namespace, f"the module dict of {self.label}"))
        return found


@dataclass(frozen=True, slots=True)
class Zombie:
    """A generation still alive after its scope closed, and what keeps it alive."""

    label: str
    chain: str
    """The shortest reference chain from a root, in words."""
    stored_at: str | None = None
    """Where a reloaded module's code made the first object of the chain it made (the
    line that handed the reference out), when ``tracemalloc`` traced it."""


def find_zombies(generations: Iterable[Generation]) -> list[Zombie]:
    """The generations of ``generations`` still alive (after a collection), each with the
    reference chain from a root that keeps it alive. One that no root reaches is held only
    by the caller's own frames or by the kit's records (an escaped task the escape check
    keeps to report it): not a zombie of the code under test, so not listed."""
    candidates = list(generations)
    if not candidates:
        return []
    # a full collection only if the young one left something (what the first look held is
    # let go before it)
    gc.collect(1)
    if not any(generation.alive() for generation in candidates):
        return []
    gc.collect()
    alive = [(generation, generation.alive()) for generation in candidates]
    alive = [(generation, objects) for generation, objects in alive if objects]
    files = {os.path.realpath(g.path) for g in candidates if g.path is not None}
    paths = _walk([{id(obj): (obj, label) for obj, label in objects} for _, objects in alive])
    return [
        Zombie(generation.label, _words(*path), _stored_at(path[0], path[2], files))
        for (generation, _), path in zip(alive, paths, strict=True)
        if path is not None
    ]


def format_zombies(zombies: list[Zombie]) -> str:
    """Render zombie generations, each with its chain."""
    lines = [
        f"{len(zombies)} generation(s) are still alive after their scope closed (zombie "
        "generations: something outside them still holds their code):"
    ]
    for index, zombie in enumerate(zombies, 1):
        lines.append("")
        lines.append(f"==== zombie {index}/{len(zombies)}: {zombie.label} ====")
        lines.append(f"    kept alive by: {zombie.chain}")
        if zombie.stored_at is not None:
            lines.append(f"    stored at: {zombie.stored_at}")
    return "\n".join(lines)


_Path = tuple[list[object], dict[int, str], dict[int, tuple[object, str]]]


def _walk(groups: list[dict[int, tuple[object, str]]]) -> list[_Path | None]:
    """For each group of targets (by id), the shortest chain from a root to one of them:
    its objects (root first), with the roots' names and the targets' labels to say it in
    words. One breadth-first walk finds all; it ends when every group has its chain or
    nothing more is reachable."""
    chains: list[_Path | None] = [None] * len(groups)
    if not groups:
        return chains
    targets: dict[int, tuple[object, str]] = {}
    group_of: dict[int, int] = {}
    for index, group in enumerate(groups):
        targets.update(group)
        group_of.update(dict.fromkeys(group, index))
    missing = set(range(len(groups)))

    def found(key: int, chain: _Path) -> None:
        index = group_of[key]
        if chains[index] is None:
            chains[index] = chain
            missing.discard(index)

    current = set(map(id, _frames_of_this_thread()))
    parents: dict[int, int | None] = {}
    objects: dict[int, object] = {}
    queue: collections.deque[object] = collections.deque()
    roots: dict[int, str] = {}
    for name, module in list(sys.modules.items()):
        if id(module) in targets:  # the zombie is still registered as the module itself
            found(id(module), ([module], {id(module): f"sys.modules[{name!r}]"}, targets))
        elif isinstance(module, types.ModuleType):
            roots[id(module)] = name
            parents[id(module)] = None
            objects[id(module)] = module
            queue.append(module)
    for thread_id, frame in sys._current_frames().items():
        if thread_id == threading.get_ident():
            continue
        thread = next((t for t in threading.enumerate() if t.ident == thread_id), None)
        roots[id(frame)] = f"thread {thread.name if thread else thread_id}"
        parents[id(frame)] = None
        objects[id(frame)] = frame
        queue.append(frame)
    skip = current | {id(parents), id(objects), id(queue), id(roots), id(targets), id(groups)}
    while queue and missing:
        node = queue.popleft()
        for child in gc.get_referents(node):
            key = id(child)
            if key in parents or key in skip or isinstance(child, _ATOMIC):
                continue
            owner = getattr(type(child), "__module__", None)
            if isinstance(owner, str) and owner.startswith(_KIT):
                continue  # the kit's own bookkeeping (a watch, a tracker) is not a culprit
            parents[key] = id(node)
            objects[key] = child
            if key in targets:
                found(key, (_path(key, parents, objects), roots, targets))
            queue.append(child)
    return chains


def _frames_of_this_thread() -> list[object]:
    frames: list[object] = []
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _path(key: int, parents: dict[int, int | None], objects: dict[int, object]) -> list[object]:
    path: list[object] = []
    node: int | None = key
    while node is not None:
        path.append(objects[node])
        node = parents[node]
    path.reverse()
    return path


def _stored_at(
    path: list[object], targets: dict[int, tuple[object, str]], files: set[str]
) -> str | None:
    """``file:line: code`` where the first object of ``path`` (after its root, before the
    targets) that a reloaded module's code made was allocated, as ``tracemalloc`` traced
    it; ``None`` when it does not trace, or traced none of them there."""
    if not tracemalloc.is_tracing():
        return None
    for node in path[1:]:
        if id(node) in targets:
            return None  # held directly: no line of the generation's made what holds it
        traceback = tracemalloc.get_object_traceback(node)
        if traceback is None:
            continue
        user = [frame for frame in traceback if not is_library(frame.filename)]
        if not user or os.path.realpath(user[-1].filename) not in files:
            continue
        frame = user[-1]
        code = linecache.getline(frame.filename, frame.lineno).strip()
        made = f" ({_label(node)} made there)"
        return f"{frame.filename}:{frame.lineno}{made}" + (f": {code}" if code else "")
    return None


def _words(
    path: list[object], roots: dict[int, str], targets: dict[int, tuple[object, str]]
) -> str:
    if len(path) == 1 and id(path[0]) in targets:  # the zombie is registered as a module
        return f"{roots[id(path[0])]} → {targets[id(path[0])][1]}"
    parts: list[str] = []
    index = 0
    if isinstance(path[0], types.ModuleType) and len(path) > 1 and path[1] is vars(path[0]):
        index = 1  # start at the module's dict: "helper.py's module dict['x']"
    while index < len(path):
        node = path[index]
        following = path[index + 1] if index + 1 < len(path) else None
        if id(node) in targets:
            parts.append(targets[id(node)][1])
            break
        label = roots[id(node)] if index == 0 and id(node) in roots else _label(node)
        if _is_namespace_of(following, node) and index + 2 < len(path):
            # an object (or class) reaches an attribute through its __dict__: say ".name"
            assert isinstance(following, dict)
            step = _step(following, path[index + 2])
            attribute = step[2:-2] if step.startswith("['") else None
            parts.append(label + (f".{attribute}" if attribute else step))
            index += 2
            continue
        parts.append(label + (_step(node, following) if following is not None else ""))
        index += 1
        if len(parts) >= _MAX_CHAIN:
            parts.append("...")
            break
    return " → ".join(parts)


def _is_namespace_of(candidate: object, node: object) -> bool:
    """``candidate`` is the ``__dict__`` of ``node`` (an instance, or a class's real dict)."""
    if not isinstance(candidate, dict) or isinstance(node, types.ModuleType):
        return False
    if isinstance(node, type):
        return candidate.keys() == vars(node).keys()
    return getattr(node, "__dict__", None) is candidate


def _label(node: object) -> str:
    if isinstance(node, dict):
        owner = _module_of_namespace(node)
        if owner is not None:
            file = getattr(owner, "__file__", None)
            name = Path(file).name if file else owner.__name__
            return f"{name}'s module dict"
        return "dict"
    if isinstance(node, types.ModuleType):
        return f"module {node.__name__}"
    if isinstance(node, types.FunctionType):
        return f"function {node.__qualname__}"
    if isinstance(node, types.MethodType):
        return f"bound method {node.__func__.__qualname__}"
    if isinstance(node, types.FrameType):
        return (
            f"frame of {node.f_code.co_name} ({Path(node.f_code.co_filename).name}:{node.f_lineno})"
        )
    if isinstance(node, types.CellType):
        return "closure cell"
    if isinstance(node, type):
        return f"class {node.__qualname__}"
    if isinstance(node, list | tuple | set | frozenset | collections.deque):
        return type(node).__name__
    return f"{type(node).__qualname__} object"


def _step(node: object, child: object) -> str:
    """How ``node`` reaches ``child``: ``['key']``, ``[3]``, ``.attribute``..."""
    if isinstance(node, dict):
        for key, value in node.items():
            if value is child:
                return f"[{key!r}]"
            if key is child:
                return " (a key)"
        return ""
    if isinstance(node, list | tuple | collections.deque):
        for position, value in enumerate(node):
            if value is child:
                return f"[{position}]"
        return ""
    if isinstance(node, types.FunctionType):
        if child is node.__globals__:
            return ".__globals__"
        for name, cell in zip(node.__code__.co_freevars, node.__closure__ or (), strict=False):
            if cell is child:
                return f" (closure variable {name!r})"
        return ""
    if isinstance(node, types.FrameType):
        for name, value in node.f_locals.items():
            if value is child:
                return f" (local {name!r})"
        return ""
    if isinstance(node, types.MethodType):
        return ".__self__" if node.__self__ is child else ".__func__"
    namespace = getattr(node, "__dict__", None)
    if isinstance(namespace, dict) and not isinstance(node, type):
        if namespace is child:
            return ".__dict__"
        for name, value in namespace.items():
            if value is child:
                return f".{name}"
    if not isinstance(node, type) and type(node) is child:
        return " (its class)"
    return ""


def _module_of_namespace(namespace: dict[str, object]) -> types.ModuleType | None:
    name = namespace.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is not None and vars(module) is namespace:
        return module
    return None
