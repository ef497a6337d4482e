"""The import graph is kept up to date from the modules each reload touched, not rebuilt:
after any sequence of edits, deletions and failures it equals one built afresh."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hotseam import Context
from hotseam.reload import Reloader
from hotseam.reload._planner import importers_of

NAMES = [f"ig_m{number}" for number in range(5)]

# An action: (module, what it becomes, reloaded now). What it becomes: its imports (watched
# modules, or a module that does not exist), a syntax error, or deleted. A save not reloaded
# at once is met by a later reload that imports the module: it then executes on demand,
# outside the plan.
_IMPORTS = st.lists(st.sampled_from([*NAMES, "ig_missing"]), max_size=3, unique=True)
_ACTION = st.tuples(
    st.sampled_from(NAMES),
    st.one_of(_IMPORTS, st.just("broken"), st.just("deleted")),
    st.booleans(),
)


def _source(name: str, imports: list[str]) -> str:
    lines = [f"import {module}" for module in imports if module != name]
    return "\n".join([*lines, "VALUE = 1", ""])


def _fresh(reloader: Reloader) -> tuple[dict[str, frozenset[str]], dict[str, set[str]]]:
    records = reloader._loader.records
    graph = {name: r.imports | r.attempt_imports for name, r in records.items()}
    return graph, importers_of(graph)


async def _run(
    folder: Path, actions: list[tuple[str, list[str] | str, bool]], broken: list[str]
) -> None:
    for name in NAMES:
        text = "def broken(:\n" if name in broken else _source(name, [])
        (folder / f"{name}.py").write_text(text)
    async with Reloader(Context("graph"), [folder], watch=False) as reloader:
        planner = reloader._planner
        for name, becomes, now in actions:
            path = folder / f"{name}.py"
            if becomes == "deleted":
                path.unlink(missing_ok=True)
            elif becomes == "broken":
                path.write_text("def broken(:\n")
            else:
                assert isinstance(becomes, list)
                path.write_text(_source(name, becomes))
            if now:
                await reloader.reload(path)
            await reloader.reload(folder / f"{NAMES[0]}.py")  # a plan that uses the graph
            graph = planner._imports()
            fresh_graph, fresh_importers = _fresh(reloader)
            assert graph == fresh_graph, (name, becomes)
            assert planner._importers == fresh_importers, (name, becomes)
    for name in NAMES:
        sys.modules.pop(name, None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=st.lists(_ACTION, min_size=1, max_size=12),
    broken=st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
)
# A module that never loaded, fixed without a reload, then imported by a reloaded one: it is
# executed on demand, outside the plan.
@example(
    actions=[("ig_m1", ["ig_m2"], False), ("ig_m0", ["ig_m1"], True)],
    broken=["ig_m1"],
)
def test_the_kept_graph_equals_a_fresh_one(
    actions: list[tuple[str, list[str] | str, bool]], broken: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as top:
        anyio.run(_run, Path(top).resolve(), actions, broken)
