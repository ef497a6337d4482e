"""The hotseam pytest plugin, tested the way its users meet it: through pytester runs."""

from __future__ import annotations

import anyio
import pytest
from tests._pytester import run_pytest

from hotseam import Context, Scope, Seam
from hotseam.testing import DisposalRecorder, assert_no_provider

pytest_plugins = ["pytester"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A pytest process with the hotseam plugin, as a user's project starts it."""
    return run_pytest(pytester, *args)


LEAKY = """
import anyio
import pytest
from hotseam import Context, Scope, Seam

SEAM = Seam("thing")
CONTEXTS = []  # reachable after the test, so whatever is active in them is observable


@pytest.mark.anyio
async def test_leaks_a_registration():
    CONTEXTS.append(Context("kept"))
    CONTEXTS[-1].provide(SEAM, object())  # LEAK-LINE


@pytest.mark.anyio
async def test_clean():
    async with Scope("tidy", context=Context("c")) as scope:
        scope.provide(SEAM, object())
"""


class TestLeakCheck:
    def test_a_leaking_test_fails_naming_the_creating_line(self, pytester: pytest.Pytester) -> None:
        """The report says what leaked, the file:line that created it, and its parent."""
        pytester.makepyfile(test_leaky=LEAKY)
        result = run(pytester, "--hotseam-leak-check")
        result.assert_outcomes(passed=4, errors=2)
        source = LEAKY.lstrip("\n").splitlines()  # makepyfile drops the leading newline
        line = source.index("    CONTEXTS[-1].provide(SEAM, object())  # LEAK-LINE") + 1
        result.stdout.fnmatch_lines(
            [
                "*ERROR at teardown of test_leaks_a_registration*",
                "*1 hotseam scope(s) or registration(s) were left open*",
                "*Registration (provider builtins.object for seam 'thing')*",
                f"*created at: *test_leaky.py:{line} (in test_leaks_a_registration)*",
                "*parent scope: none (a root)*",
            ]
        )
        assert "test_clean" not in "\n".join(
            line for line in result.stdout.lines if line.startswith("ERROR")
        )

    def test_without_the_option_nothing_is_checked(self, pytester: pytest.Pytester) -> None:
        """The check is opt-in."""
        pytester.makepyfile(test_leaky=LEAKY)
        run(pytester).assert_outcomes(passed=4)

    def test_the_ini_option_and_the_marker(self, pytester: pytest.Pytester) -> None:
        """hotseam_leak_check = true in ini; the marker enables or disables one test."""
        pytester.makeini("[pytest]\nhotseam_leak_check = true\n")
        pytester.makepyfile(
            test_marked="""
            import pytest
            from hotseam import Context, Seam

            CONTEXT = Context("m")

            @pytest.mark.hotseam_leak_check(False)
            def test_exempt():
                CONTEXT.provide(Seam("a"), object())

            def test_checked():
                CONTEXT.provide(Seam("b"), object())
            """
        )
        result = run(pytester)
        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines(["*ERROR at teardown of test_checked*"])

    def test_the_marker_alone_enables_the_check(self, pytester: pytest.Pytester) -> None:
        """@pytest.mark.hotseam_leak_check turns the check on for one test."""
        pytester.makepyfile(
            test_one="""
            import pytest
            from hotseam import Scope

            KEEP = []

            @pytest.mark.hotseam_leak_check
            def test_marked():
                KEEP.append(Scope("forgotten"))

            def test_unmarked():
                KEEP.append(Scope("also forgotten"))
            """
        )
        result = run(pytester)
        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines(["*Scope 'forgotten'*"])

    def test_a_failing_test_gets_no_second_leak_failure(self, pytester: pytest.Pytester) -> None:
        """Leaks are only checked when the test passed."""
        pytester.makepyfile(
            test_fails="""
            from hotseam import Scope
            KEEP = []

            def test_fails_and_leaks():
                KEEP.append(Scope("leaked"))
                assert 1 == 2
            """
        )
        result = run(pytester, "--hotseam-leak-check")
        result.assert_outcomes(failed=1)
        assert "left open" not in result.stdout.str()

    def test_only_roots_are_reported_and_shared_stacks_grouped(
        self, pytester: pytest.Pytester
    ) -> None:
        """A leaked scope covers its children; three leaks from one line are one group."""
        pytester.makepyfile(
            test_roots="""
            from hotseam import Scope
            KEEP = []

            def make():
                scope = Scope("root")
                scope.child("child-a").defer(lambda: None)
                scope.child("child-b")
                return scope

            def test_roots():
                for _ in range(3):
                    KEEP.append(make())
            """
        )
        result = run(pytester, "--hotseam-leak-check")
        result.assert_outcomes(passed=1, errors=1)
        output = result.stdout.str()
        assert "3 hotseam scope(s) or registration(s) were left open" in output
        assert "(x3, sharing one creation stack)" in output
        assert "still holds 3 open child object(s)" in output
        assert "child-a" not in output

    def test_long_lived_objects_are_skipped_but_their_children_are_checked(
        self, pytester: pytest.Pytester
    ) -> None:
        """mark_long_lived exempts an object; a child left open under it is a root leak."""
        pytester.makepyfile(
            test_long="""
            from hotseam import Scope, mark_long_lived
            KEEP = []

            def test_long_lived():
                app = mark_long_lived(Scope("app"))
                KEEP.append(app)
                KEEP.append(app.child("request"))
            """
        )
        result = run(pytester, "--hotseam-leak-check")
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*Scope 'request'*", "*parent scope: Scope 'app'*"])
        assert "leak 2/" not in result.stdout.str()


STRICT = """
import anyio
import pytest
from hotseam import Seam

SEAM = Seam("widget")
REGISTRY = []
LEAKY_REGISTRY = []


def leaky_setup(scope):
    LEAKY_REGISTRY.append("widget")
    scope.defer(lambda: None)  # forgets to remove it from LEAKY_REGISTRY


def direct_setup(scope):
    scope.context.provide(SEAM, object())  # not through the scope: never disposed


def correct_setup(scope):
    REGISTRY.append("widget")
    scope.defer(lambda: REGISTRY.remove("widget"))
    scope.provide(SEAM, object())


@pytest.mark.anyio
async def test_leaky(hotseam_setup):
    await hotseam_setup(leaky_setup, name="leaky", probe=lambda: list(LEAKY_REGISTRY))


@pytest.mark.anyio
async def test_direct(hotseam_setup):
    await hotseam_setup(direct_setup, name="direct")


@pytest.mark.anyio
async def test_correct(hotseam_setup, hotseam_context):
    scope = await hotseam_setup(correct_setup, name="correct", probe=lambda: list(REGISTRY))
    assert REGISTRY == ["widget"]
    assert hotseam_context.lookup(SEAM) is not None
    await scope.aclose()
    assert REGISTRY == []
"""


class TestStrictMode:
    def test_strict_mode_catches_forgotten_cleanup_and_passes_correct_code(
        self, pytester: pytest.Pytester
    ) -> None:
        """Set up, dispose, set up again: leftovers of the first setup fail the test."""
        pytester.makepyfile(test_strict=STRICT)
        result = run(pytester, "--hotseam-strict")
        result.assert_outcomes(passed=2, failed=4)
        result.stdout.fnmatch_lines(
            [
                "*StrictModeError*disposing 'leaky' did not undo everything*probed state changed*",
            ]
        )
        result.stdout.fnmatch_lines(
            ["*StrictModeError*'direct'*provider for seam 'widget' still active*"]
        )

    def test_without_strict_mode_the_setup_runs_once(self, pytester: pytest.Pytester) -> None:
        """Strict mode is opt-in, like React's development-only double setup."""
        pytester.makepyfile(test_strict=STRICT)
        run(pytester).assert_outcomes(passed=6)

    def test_the_marker_turns_strict_mode_on(self, pytester: pytest.Pytester) -> None:
        """@pytest.mark.hotseam_strict on one test."""
        pytester.makepyfile(
            test_marker="""
            import pytest
            TASKS = []

            @pytest.fixture
            def anyio_backend():
                return "asyncio"  # only asyncio lets a task run outside any task group

            async def starts_a_stray_task(scope):
                import anyio
                # a task outside the scope: disposal cannot stop it
                TASKS.append(scope)
                scope.context.tools  # touch the context
                async def forever():
                    await anyio.sleep_forever()
                import asyncio
                TASKS.append(asyncio.get_running_loop().create_task(forever(), name="stray"))

            @pytest.mark.anyio
            @pytest.mark.hotseam_strict
            async def test_stray(hotseam_setup):
                try:
                    await hotseam_setup(starts_a_stray_task, name="stray")
                finally:
                    TASKS[-1].cancel()
            """
        )
        result = run(pytester)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*task 'stray' started by the first setup is still running*"])


class TestFixtures:
    def test_the_fixtures_work_together(self, pytester: pytest.Pytester) -> None:
        """A fresh context, a scripted provider installed in it, all closed after the test."""
        pytester.makepyfile(
            test_fixtures="""
            import pytest
            from hotseam.interaction import AskUserQuestionRequest, ask

            @pytest.mark.anyio
            async def test_ask(hotseam_context, hotseam_provider):
                hotseam_provider.push("Ada")
                answer = await ask(AskUserQuestionRequest("Name?"), context=hotseam_context)
                assert answer.answer == "Ada"
                assert hotseam_provider.requests[0].question == "Name?"

            def test_leaks_fixture(hotseam_leaks):
                assert hotseam_leaks.leaks() == []
            """
        )
        result = run(pytester, "--hotseam-leak-check")
        result.assert_outcomes(passed=3)


pytestmark = pytest.mark.anyio


class TestAssertionHelpers:
    async def test_disposal_recorder_checks_order_and_exactly_once(self) -> None:
        """Order and exactly-once, with messages that say what differs."""
        recorder = DisposalRecorder()
        async with Scope("recorded") as scope:
            scope.defer(recorder.callback("db"))
            scope.defer(recorder.async_callback("cache"))
        recorder.assert_order(["cache", "db"])
        recorder.assert_exactly_once()
        with pytest.raises(AssertionError, match="first difference at position 0"):
            recorder.assert_order(["db", "cache"])
        recorder.record("db")
        with pytest.raises(AssertionError, match="'db' ran 2 times"):
            recorder.assert_exactly_once()

    async def test_assert_no_provider(self) -> None:
        """Names the active provider and where it was registered."""
        context = Context("asserts")
        seam: Seam[object] = Seam("thing")
        assert_no_provider(context)
        assert_no_provider(context, seam)
        async with Scope("s", context=context) as scope:
            scope.provide(seam, object())
            with pytest.raises(AssertionError, match=r"test_pytest_plugin\.py"):
                assert_no_provider(context, seam)
            with pytest.raises(AssertionError, match="'thing'"):
                assert_no_provider(context)
        assert_no_provider(context)
        await anyio.lowlevel.checkpoint()


RELOADING = '''
import pytest
from hotseam.interaction import USER_INTERACTION, AskUserQuestionRequest, ask
from hotseam.testing import assert_generation_active, assert_no_provider

UI = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider

def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: "{answer}"))
"""

LEAKY_UI = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider

def setup(scope):
    scope.context.provide(USER_INTERACTION, ScriptedProvider(["x"]))  # bypasses the scope
"""


@pytest.mark.anyio
async def test_reload_driver(hotseam_reloader, hotseam_context):
    status = await hotseam_reloader.load("my_ui.py", UI.format(answer="one"))
    first = status.generation  # 1, or 2 in strict mode (set up, unloaded, set up again)
    assert_generation_active(hotseam_reloader, "my_ui.py", first)
    question = AskUserQuestionRequest("Which?")
    assert (await ask(question, context=hotseam_context)).answer == "one"

    hotseam_reloader.write("my_ui.py", UI.format(answer="two"))
    (await hotseam_reloader.reload("my_ui.py")).raise_for_errors()
    assert_generation_active(hotseam_reloader, "my_ui.py", first + 1)
    assert (await ask(question, context=hotseam_context)).answer == "two"

    hotseam_reloader.write("my_ui.py", "def setup(scope):\\n    raise RuntimeError('broken')\\n")
    result = await hotseam_reloader.reload("my_ui.py")
    assert result.aborted and not result.committed
    assert (await ask(question, context=hotseam_context)).answer == "two"
    with pytest.raises(AssertionError, match=f"failed with generation {first + 1}"):
        assert_generation_active(hotseam_reloader, "my_ui.py", first + 1)

    hotseam_reloader.delete("my_ui.py")
    await hotseam_reloader.reload()
    assert_no_provider(hotseam_context, USER_INTERACTION)


@pytest.mark.anyio
async def test_leaky_module(hotseam_reloader):
    await hotseam_reloader.load("leaky_ui.py", LEAKY_UI)
'''


class TestReloadDriver:
    def test_driving_reloads_in_a_test(self, pytester: pytest.Pytester) -> None:
        """Write, reload, assert the generation; a failed reload keeps the old one serving."""
        pytester.makepyfile(test_reloading=RELOADING)
        result = run(pytester, "--hotseam-leak-check", "-k", "driver")
        result.assert_outcomes(passed=2)

    def test_strict_mode_unloads_and_reloads_each_module(self, pytester: pytest.Pytester) -> None:
        """A module whose provider outlives its generation fails in strict mode only."""
        pytester.makepyfile(test_reloading=RELOADING)
        strict = run(pytester, "--hotseam-strict")
        strict.assert_outcomes(passed=2, failed=2)
        strict.stdout.fnmatch_lines(
            ["*StrictModeError*unloading 'leaky_ui.py'*seam 'user-interaction' still active*"]
        )
        lenient = run(pytester)
        lenient.assert_outcomes(passed=4)
