"""Behaviour 4: editing a helper re-runs exactly the modules that imported it, in order."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import ask
from hotseam.reload import ModuleState, ReloadCommitted, Reloader, ReloadPlanned

from ._support import Probe
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio


def _module(name: str, imports: str = "", *, provider: bool = False, seam: str = "") -> str:
    """A module that logs when it executes (and when it is set up, for a provider)."""
    lines = ["import reload_probe", imports, f"reload_probe.log.append(('exec', {name!r}))"]
    if provider:
        lines += [
            "def setup(scope):",
            f"    reload_probe.log.append(('setup', {name!r}))",
            f"    scope.defer(lambda: reload_probe.log.append(('dispose', {name!r})))",
        ]
        if seam:
            lines.append(f"    scope.provide({seam})")
    return "\n".join(lines) + "\n"


class TestDependents:
    async def test_a_helper_edit_reruns_its_importers_in_dependency_order_and_nothing_else(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """base ← mid ← p1 (transitive), base ← p2 (direct); p3 and lone are unrelated.

        p3 imports base only inside a function that never ran: no import was made, so it is
        not a dependent.
        """
        base = write(folder / "base.py", _module("base"))
        write(folder / "mid.py", _module("mid", "import base"))
        write(folder / "p1.py", _module("p1", "from mid import *", provider=True))
        write(folder / "p2.py", _module("p2", "import base", provider=True))
        write(
            folder / "p3.py",
            _module("p3", "def later():\n    import base\n", provider=True),
        )
        write(folder / "lone.py", _module("lone"))
        async with Reloader(context, [folder], watch=False) as reloader:
            assert reloader.status_of(folder / "p1.py").imports == ("mid",)
            assert reloader.status_of(folder / "mid.py").imports == ("base",)
            assert reloader.status_of(folder / "p3.py").imports == ()
            probe.log.clear()
            write(base, _module("base") + "# edited\n")
            result = await reloader.reload(base)
            executed = probe.entries("exec")
            assert sorted(executed) == ["base", "mid", "p1", "p2"]
            assert executed.index("base") < executed.index("mid") < executed.index("p1")
            assert executed.index("base") < executed.index("p2")
            assert sorted(probe.entries("setup")) == ["p1", "p2"]
            assert sorted(probe.entries("dispose")) == ["p1", "p2"]
            (planned,) = [e for e in result.events if isinstance(e, ReloadPlanned)]
            assert planned.changed == (base,)
            assert [p.stem for p in planned.modules] == executed
            generations = {c.path.stem: c.generation for c in result.committed}
            assert generations == {"base": 2, "mid": 2, "p1": 2, "p2": 2}
            assert reloader.status_of(folder / "p3.py").generation == 1

    async def test_providers_are_set_up_after_the_providers_they_import(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A provider importing another provider is set up after it (and disposed before)."""
        shared = write(folder / "shared.py", _module("shared"))
        write(folder / "alpha.py", _module("alpha", "import zulu, shared", provider=True))
        write(folder / "zulu.py", _module("zulu", "import shared", provider=True))
        async with Reloader(context, [folder], watch=False) as reloader:
            assert probe.entries("setup") == ["zulu", "alpha"]
            probe.log.clear()
            write(shared, _module("shared") + "# edited\n")
            await reloader.reload(shared)
            assert probe.entries("setup") == ["zulu", "alpha"]
            assert probe.entries("dispose") == ["alpha", "zulu"]
            probe.log.clear()
        assert probe.entries("dispose") == ["alpha", "zulu"]

    async def test_a_helper_edit_through_the_watcher_reloads_the_provider(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Real watcher: the provider's new generation uses the helper's new content."""
        words = write(folder / "words.py", "WORD = 'first'\n")
        write(
            folder / "my_ui.py",
            """
            import words
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            def setup(scope):
                scope.provide(USER_INTERACTION, ScriptedProvider(lambda r: words.WORD))
            """,
        )
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                assert (await ask(QUESTION, context=context)).answer == "first"
                write(words, "WORD = 'second'\n")
                await events.next(ReloadCommitted, path=folder / "my_ui.py")
                assert (await ask(QUESTION, context=context)).answer == "second"

    async def test_a_deleted_helper_fails_its_importers_until_it_comes_back(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Importers keep serving; recreating the helper loads them again (missing imports)."""
        words = write(folder / "words.py", "WORD = 'first'\n")
        ui = write(
            folder / "my_ui.py",
            """
            import words
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            def setup(scope):
                scope.provide(USER_INTERACTION, ScriptedProvider(lambda r: words.WORD))
            """,
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            words.unlink()
            result = await reloader.reload(words)
            assert [u.path for u in result.unloaded] == [words]
            (aborted,) = result.aborted
            assert aborted.path == ui and aborted.error.type == "ModuleNotFoundError"
            assert aborted.error.location == f"{ui}:1"
            assert reloader.status_of(words).state is ModuleState.UNLOADED
            assert "words" not in sys.modules
            assert (await ask(QUESTION, context=context)).answer == "first"
            write(words, "WORD = 'back'\n")
            result = await reloader.reload(words)
            assert sorted(c.path.name for c in result.committed) == ["my_ui.py", "words.py"]
            assert (await ask(QUESTION, context=context)).answer == "back"


class TestImportNames:
    async def test_a_watched_package_is_imported_by_its_package_name(
        self, context: Context, tmp_path: Path, probe: Probe
    ) -> None:
        """``pkgui/`` with __init__.py: ``pkgui.ui`` imports ``from . import words`` and
        ``from pkgui.tone import TONE``; editing either reloads the provider."""
        package = tmp_path / "pkgui"
        write(package / "__init__.py", "")
        words = write(package / "words.py", "WORD = 'one'\n")
        tone = write(package / "tone.py", "TONE = '!'\n")
        write(
            package / "ui.py",
            """
            from . import words
            from pkgui.tone import TONE
            import pkgui.words
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            assert pkgui.words is words

            def setup(scope):
                scope.provide(
                    USER_INTERACTION, ScriptedProvider(lambda r: words.WORD + TONE)
                )
            """,
        )
        async with Reloader(context, [package], watch=False) as reloader:
            names = {status.module for status in reloader.status()}
            assert names == {"pkgui", "pkgui.words", "pkgui.tone", "pkgui.ui"}
            assert reloader.status_of(package / "ui.py").imports == (
                "pkgui",
                "pkgui.tone",
                "pkgui.words",
            )
            assert (await ask(QUESTION, context=context)).answer == "one!"
            write(words, "WORD = 'two'\n")
            result = await reloader.reload(words)
            assert sorted(c.module for c in result.committed) == ["pkgui.ui", "pkgui.words"]
            assert sys.modules["pkgui"].words is sys.modules["pkgui.words"]
            assert (await ask(QUESTION, context=context)).answer == "two!"
            write(tone, "TONE = '?'\n")
            await reloader.reload(tone)
            assert (await ask(QUESTION, context=context)).answer == "two?"
        assert not any(name.startswith("pkgui") for name in sys.modules)

    async def test_a_single_file_imports_its_siblings_by_plain_name(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Watching one file: the siblings it imports are watched and tracked; others are not
        loaded."""
        words = write(folder / "words.py", "WORD = 'one'\n")
        write(folder / "unrelated.py", _module("unrelated"))
        ui = write(
            folder / "my_ui.py",
            """
            import words
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            def setup(scope):
                scope.provide(USER_INTERACTION, ScriptedProvider(lambda r: words.WORD))
            """,
        )
        async with Reloader(context, [ui], watch=False) as reloader:
            assert {s.path for s in reloader.status()} == {ui, words}
            write(words, "WORD = 'two'\n")
            await reloader.reload(words)
            assert (await ask(QUESTION, context=context)).answer == "two"
        assert probe.entries("exec") == []

    async def test_subpackages_and_unimportable_files_under_a_folder(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A sub-folder with __init__.py is a package; one without, and bad names, are
        reported as skipped, never silently loaded or dropped."""
        write(folder / "kit" / "__init__.py", "")
        write(folder / "kit" / "ui.py", _module("kit.ui", "from . import parts"))
        write(folder / "kit" / "parts.py", _module("kit.parts"))
        write(folder / "loose" / "stray.py", _module("stray"))
        write(folder / "my-ui.py", _module("dash"))
        with structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder], watch=False) as reloader:
                assert {s.module for s in reloader.status()} == {"kit", "kit.ui", "kit.parts"}
        skipped = {e["path"]: e["reason"] for e in logs if e["event"] == "reload.skipped"}
        assert set(skipped) == {str(folder / "loose"), str(folder / "my-ui.py")}
        assert "__init__.py" in skipped[str(folder / "loose")]
        assert sorted(probe.entries("exec")) == ["kit.parts", "kit.ui"]


class TestWhoImports:
    """Every watched module shares one builtins namespace; an import is attributed to the
    module whose globals it runs in, or to the body this thread is executing."""

    async def test_a_function_importing_later_gets_what_serves_then(
        self, context: Context, folder: Path
    ) -> None:
        helper = write(folder / "wi_helper.py", "VERSION = 1\n")
        user = write(
            folder / "wi_user.py",
            """
            import wi_helper

            def later():
                import wi_helper as again
                return again.VERSION
            """,
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            module = sys.modules["wi_user"]
            assert module.later() == 1
            write(helper, "VERSION = 2\n")
            assert (await reloader.reload(helper)).ok
            assert sys.modules["wi_user"].later() == 2
            assert module.later() == 2  # the replaced generation's live code: what serves now
            assert reloader.status_of(user).imports == ("wi_helper",)

    async def test_code_exec_d_in_fresh_globals_by_a_body_imports_as_that_body(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``exec(src, {})`` in a module body: its import is the body's (executed now, even
        though the helper sorts later, and tracked as a dependency)."""
        write(
            folder / "wi_a.py",
            "import reload_probe\n"
            "found = {}\n"
            "exec('import wi_z; version = wi_z.VERSION', found)\n"
            "reload_probe.log.append(('z', found['version']))\n",
        )
        helper = write(folder / "wi_z.py", "VERSION = 1\n")
        async with Reloader(context, [folder], watch=False) as reloader:
            assert probe.entries("z") == [1]
            assert reloader.status_of(folder / "wi_a.py").imports == ("wi_z",)
            write(helper, "VERSION = 2\n")
            assert (await reloader.reload(helper)).ok
            assert probe.entries("z") == [1, 2]

    async def test_a_loaded_module_keeps_no_load_bookkeeping(
        self, context: Context, folder: Path
    ) -> None:
        """What recorded a body's imports is let go when its reload ends (memory per module)."""
        write(folder / "wi_plain.py", "import wi_dep\n")
        write(folder / "wi_dep.py", "X = 1\n")
        async with Reloader(context, [folder], watch=False):
            for name in ("wi_plain", "wi_dep"):
                assert sys.modules[name].__spec__.loader_state is None
