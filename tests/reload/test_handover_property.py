"""Issue 13, as a property: any sequence of reloads leaves every carried value disposed
exactly once, and never while a serving generation uses it.

Steps: a reload that commits (carrying the key with some version), one whose setup fails
after carrying, one that drops the key, and an unload. A model predicts which value serves
after each step and how many values exist; the resources check "never disposed twice" and
"never disposed while serving" themselves.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotseam import Context
from hotseam.reload import Reloader

pytestmark = pytest.mark.anyio


VIOLATIONS: list[str] = []


@dataclass(eq=False)
class Res:
    """A carried value; ``users`` counts the live generations (staged or serving) using it."""

    version: int
    disposals: int = 0
    users: int = 0

    def dispose(self) -> None:
        # Recorded, not raised: the reloader reports a disposer's failure and goes on.
        if self.users:
            VIOLATIONS.append(f"v{self.version} disposed while {self.users} generation(s) use it")
        self.disposals += 1
        if self.disposals > 1:
            VIOLATIONS.append(f"v{self.version} disposed {self.disposals} times")

    def use(self, scope: object) -> None:
        self.users += 1

    def release(self) -> None:
        self.users -= 1


@dataclass
class World:
    made: list[Res] = field(default_factory=list)

    def make(self, version: int) -> Res:
        res = Res(version)
        self.made.append(res)
        return res


SOURCE = """
import handover_world as W

def setup(scope):
    res = scope.carry("res", lambda: W.world.make({version}), dispose=W.Res.dispose,
                      version={version})
    res.use(scope)
    scope.defer(res.release)  # runs before the value's own dispose (last in, first out)
    W.candidate = res
{tail}
# step {step}
"""

DROP = "def setup(scope):\n    pass\n# step {step}\n"

Step = tuple[str, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("ok"), st.integers(1, 2)),
        st.tuples(st.just("fail"), st.integers(1, 2)),
        st.tuples(st.sampled_from(["drop", "unload"]), st.just(0)),
    ),
    max_size=10,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(plan=steps)
async def test_every_carried_value_is_disposed_once_and_never_while_serving(
    plan: list[Step],
) -> None:
    world = World()
    module = ModuleType("handover_world")
    module.__dict__.update(world=world, Res=Res, candidate=None)
    sys.modules["handover_world"] = module
    counter = itertools.count()
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "carrier.py"
            serving: Res | None = None
            async with Reloader(Context("property"), [folder], watch=False) as reloader:
                for kind, version in plan:
                    made_before = len(world.made)
                    if kind == "unload":
                        if path.exists():
                            path.unlink()
                        await reloader.reload(path)
                        expected: Res | None = None
                    elif kind == "drop":
                        path.write_text(DROP.format(step=next(counter)))
                        (await reloader.reload(path)).raise_for_errors()
                        expected = None
                    else:
                        tail = (
                            "    raise RuntimeError('fails after carrying')"
                            if kind == "fail"
                            else ""
                        )
                        text = SOURCE.format(version=version, tail=tail, step=next(counter))
                        path.write_text(text)
                        module.__dict__["candidate"] = None
                        result = await reloader.reload(path)
                        reuses = serving is not None and serving.version == version
                        assert len(world.made) == made_before + (0 if reuses else 1)
                        if kind == "fail":
                            assert result.aborted
                            expected = serving
                            if not reuses:  # the fresh value of the failed generation
                                assert world.made[-1].disposals == 1
                        else:
                            result.raise_for_errors()
                            expected = module.__dict__["candidate"]
                            assert expected is (serving if reuses else world.made[-1])
                    assert VIOLATIONS == []
                    # What no longer serves was disposed at the commit, once; what serves
                    # is used by exactly one generation and not disposed.
                    for res in world.made:
                        assert res.disposals == (0 if res is expected else 1)
                    if expected is not None:
                        assert expected.users == 1
                    serving = expected
        assert all(res.disposals == 1 for res in world.made)
        assert VIOLATIONS == []
    finally:
        VIOLATIONS.clear()
        del sys.modules["handover_world"]
