"""What each entry point imports: the budgets of ``import hotseam``, ``hotseam --help``,
``hotseam status``/``reload`` and ``hotseam run`` up to its first served question.

Start-up time is mostly imports (docs/performance.md, "Start-up"), and a regression there is
one import added in the wrong place, so the budgets are the modules imported, which do not
depend on the machine's load: anyio is ~10 ms of a start, structlog ~15, pydantic and the
input models ~50, the web stack ~25, dataclasses ~5. ``import hotseam`` and the socket's
clients (``hotseam status`` and ``reload``) import no core beyond the error tree and no
third-party module at all; ``hotseam run`` serves its first question without watchfiles
(where inotify watches), the web stack, prompt_toolkit or the ACP SDK, and with everything
its serving path needs already imported (pydantic and the input models included): out of
descriptors, a daemon cannot import. The clients and the daemon are the real ones (one
``hotseam run`` serves the tests that need it); each check runs in a fresh interpreter,
since this test process has imported everything long ago.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._timing import scaled

from hotseam.reload import NativeWatcher

HEAVY = ("prompt_toolkit", "pydantic", "structlog", "acp", "watchfiles")
WEB = ("starlette", "hypercorn", "h11", "h2", "wsproto")
THIRD_PARTY = (*HEAVY, *WEB, "anyio", "sniffio", "pydantic_core", "typing_extensions", "psycopg")

STATUS_CORE = ["hotseam._core", "hotseam._core._errors", "hotseam._core._public"]
"""The whole of the core a client of the control socket imports: the error tree."""

STATUS_STDLIB_BUDGET = {
    "dataclasses",
    "inspect",
    "typing",
    "tempfile",
    "shutil",
    "asyncio",
    "logging",
}
"""Standard-library modules ``hotseam status`` and ``reload`` stay without (the first two
were a fifth of its start, ``typing`` a tenth; ``tempfile`` is imported only when no
``XDG_RUNTIME_DIR`` is set)."""
STATUS_ONLY_STDLIB_BUDGET = {"argparse", "gettext", "pathlib", "glob"}
"""And those ``hotseam status`` stays without in its common forms (argparse with gettext
was a third of what it imported, pathlib a sixth; its sockets are found with ``os.path``)."""

_REPORT = """
import json, sys
{code}
print(json.dumps(sorted(name for name in sys.modules if name.partition(".")[0] in {heavy!r}
                 or name.startswith("hotseam.cli._"))))
"""


def _imported(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``heavy`` modules (and CLI subcommand modules) a fresh interpreter holds after
    ``code``."""
    script = _REPORT.format(code=code, heavy=set(heavy))
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
    )
    imported: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return imported


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Every module a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), flush=True)\n"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
        env=env,
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_import_hotseam_imports_no_heavy_dependency() -> None:
    assert _imported("import hotseam") == []


def test_the_pytest_plugin_imports_no_reload_interaction_or_provider_until_a_fixture_does() -> None:
    """pytest loads the plugin in every run of a project that installs hotseam: the reload
    driver (hotseam.reload), the seam and the scripted provider are imported by the
    fixtures that use them, not by the plugin."""
    loaded = _modules_after("import hotseam.pytest_plugin")
    assert not {
        name
        for name in loaded
        if name.startswith(("hotseam.reload", "hotseam.interaction", "hotseam.providers"))
        or name == "hotseam.testing._driver"
    }
    assert not {name.partition(".")[0] for name in loaded} & {*HEAVY, *WEB}


def test_a_lazily_loaded_kit_name_shows_the_public_module_however_it_was_reached() -> None:
    """``GrowthError`` raised by ``assert_reload_stable`` reads ``hotseam.testing.GrowthError``
    in a failure, though only the function was imported."""
    code = (
        "from hotseam.testing import assert_reload_stable\n"
        "import sys\n"
        "print(sys.modules['hotseam.testing._growth'].GrowthError.__module__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=scaled(60)
    )
    assert result.stdout.strip() == "hotseam.testing"


def test_import_hotseam_imports_nothing_of_the_core_until_a_name_is_used() -> None:
    """The public names load on first use (PEP 562): ``import hotseam`` is the package
    alone, without anyio; ``hotseam.HarnessError`` brings the error tree only."""
    modules = _modules_after("import hotseam")
    assert sorted(name for name in modules if name.startswith("hotseam")) == [
        "hotseam",
        "hotseam._core",
        "hotseam._core._public",
    ]
    assert not {name.partition(".")[0] for name in modules} & set(THIRD_PARTY)
    modules = _modules_after("import hotseam\nhotseam.HarnessError")
    assert sorted(name for name in modules if name.startswith("hotseam")) == [
        "hotseam",
        "hotseam._core",
        "hotseam._core._errors",
        "hotseam._core._public",
    ]


@pytest.mark.parametrize(
    "code",
    [
        "import hotseam.interaction",
        "from hotseam._core import Context",
        "import hotseam.reload",
        "from hotseam._core._scope import Scope\nfrom hotseam._core import Seam",
    ],
)
def test_a_core_name_shows_the_public_module_however_it_was_reached(code: str) -> None:
    """Loaded lazily or not, through ``hotseam`` or not: once its module is loaded (and the
    core was asked for anything), a public name says ``hotseam.Scope``."""
    check = (
        f"{code}\nimport sys\n"
        "from hotseam import __all__ as public\n"
        "from hotseam._core import _DEFINED_IN\n"
        "shown = {}\n"
        "for name in public:\n"
        "    module = sys.modules.get('hotseam._core.' + _DEFINED_IN[name])\n"
        "    if module is not None and hasattr(getattr(module, name), '__module__'):\n"
        "        shown[name] = getattr(module, name).__module__\n"
        "print(__import__('json').dumps(shown))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", check],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
    )
    shown: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    assert "Scope" in shown or "Context" in shown or "Seam" in shown
    assert {name: module for name, module in shown.items() if "._" in module} == {}


def test_dir_lists_every_public_name_before_it_is_loaded() -> None:
    """``dir(hotseam)`` (and ``dir(hotseam._core)``) list the names not yet imported."""
    check = (
        "import hotseam, hotseam._core, sys\n"
        "assert set(hotseam.__all__) <= set(dir(hotseam)), 'hotseam'\n"
        "assert set(hotseam._core.__all__) <= set(dir(hotseam._core)), 'core'\n"
        "assert 'hotseam._core._scope' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", check], check=True, timeout=scaled(60))


def test_an_unknown_name_is_an_attribute_error() -> None:
    import hotseam
    import hotseam._core

    with pytest.raises(AttributeError, match="has no attribute 'Scoep'"):
        getattr(hotseam, "Scoep")  # noqa: B009 - the lookup is the test
    with pytest.raises(ImportError):
        exec("from hotseam._core import Scoep", {})


@pytest.mark.parametrize("argv", [["--help"], [], ["--version"]])
def test_the_command_without_a_subcommand_imports_no_subcommand(argv: list[str]) -> None:
    code = (
        "import contextlib, io\n"
        "from hotseam.cli import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"    with contextlib.suppress(SystemExit):\n        main({argv!r})\n"
    )
    imported = [name for name in _imported(code) if name != "hotseam.cli._help"]
    assert imported == []


def test_a_subcommand_imports_its_own_module_only() -> None:
    code = (
        "import contextlib, io\n"
        "from hotseam.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    with contextlib.suppress(SystemExit):\n        main(['status', '--help'])\n"
    )
    modules = [name for name in _imported(code) if name.startswith("hotseam.cli._")]
    assert "hotseam.cli._status" in modules
    assert not {"hotseam.cli._dev", "hotseam.cli._acp", "hotseam.cli._demo"} & set(modules)


def test_a_subcommands_help_is_its_docstring_as_plain_text() -> None:
    """The description is rendered for --help (not at every start): no reST markup left."""
    result = subprocess.run(
        [sys.executable, "-m", "hotseam", "status", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
    )
    assert "hotseam status [PID|NAME]: what a running hotseam dev or hotseam run" in result.stdout
    assert "``" not in result.stdout


# -- the real daemon and its clients -----------------------------------------------------------

PROVIDER = """
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer


class Provider:
    async def ask(self, request):
        return AskUserQuestionAnswer("fine")


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""

AGENT = """
import json
import os
import signal
import sys

import anyio
from hotseam.interaction import AskUserQuestionRequest, ask


def modules():
    return json.dumps(sorted(sys.modules))


async def out_of_descriptors(context):
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        result = await context.tools.execute("ask_user_question", {"question": "Still there?"})
        described = context.tools.get("ask_user_question").definition()["name"]
        return {"held": len(held), "output": result.output, "described": described}
    except Exception as error:
        return {"held": len(held), "error": repr(error)}
    finally:
        for descriptor in held:
            os.close(descriptor)


async def main(context):
    answer = await ask(AskUserQuestionRequest("How are you?"), context=context)
    print("answer:", answer.answer, flush=True)
    print(modules(), flush=True)
    with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
        print(json.dumps(await out_of_descriptors(context)), flush=True)
        print(modules(), flush=True)
        async for _ in signals:
            print(modules(), flush=True)
"""

DESCRIPTORS = 64
"""The daemon's limit (soft and hard): it serves with a few dozen open."""


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


class Daemon:
    """A real ``hotseam run`` (few descriptors allowed) whose agent asked one question, then
    took every descriptor left and called the ask tool; the modules it held at each step."""

    def __init__(self, folder: Path) -> None:
        (folder / "providers").mkdir()
        (folder / "providers" / "ui.py").write_text(textwrap.dedent(PROVIDER), encoding="utf-8")
        (folder / "agent.py").write_text(textwrap.dedent(AGENT), encoding="utf-8")
        self.env = {**os.environ, "HOTSEAM_RUNTIME_DIR": str(folder / "run")}
        self.env.pop("XDG_RUNTIME_DIR", None)
        command = ["run", "providers", "--agent", "agent.py:main", "--no-journal"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hotseam", *command],
            cwd=folder,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=_limit_descriptors,
        )
        answer = self.line()
        assert answer == "answer: fine\n", answer
        self.modules_at_first_answer = set(json.loads(self.line()))
        self.out_of_descriptors: dict[str, object] = json.loads(self.line())
        self.modules_after_the_tool = set(json.loads(self.line()))

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=scaled(30))
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = Daemon(tmp_path_factory.mktemp("daemon"))
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("command", ["status", "reload"])
def test_status_and_reload_import_neither_anyio_nor_the_core(daemon: Daemon, command: str) -> None:
    """The socket's clients, run against a real daemon: the standard library and the error
    tree only (no anyio, pydantic or structlog; no dataclasses or inspect either)."""
    code = (
        "import contextlib, io, sys\n"
        "from hotseam.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    code = main([{command!r}, {str(daemon.process.pid)!r}"
        + (", '--json'])\n" if command == "status" else "])\n")
        + "assert code == 0, out.getvalue()\n"
    )
    if command == "reload":
        code = code.replace(f"{str(daemon.process.pid)!r}", f"'--to', {str(daemon.process.pid)!r}")
    modules = _modules_after(code, env=daemon.env)
    assert sorted(name for name in modules if name.startswith("hotseam._core")) == STATUS_CORE
    assert not {name.partition(".")[0] for name in modules} & set(THIRD_PARTY)
    assert not modules & STATUS_STDLIB_BUDGET
    if command == "status":
        assert not modules & STATUS_ONLY_STDLIB_BUDGET
        assert {name for name in modules if name.startswith("hotseam.cli._")} == {
            "hotseam.cli._status",
            "hotseam.cli._control_client",
        }
    else:  # parsed by argparse (its formatter is _help's); no pathlib
        assert "pathlib" not in modules
        assert {name for name in modules if name.startswith("hotseam.cli._")} == {
            "hotseam.cli._reload_cmd",
            "hotseam.cli._control_client",
            "hotseam.cli._help",
        }


def test_hotseam_status_replies_through_the_light_client(daemon: Daemon) -> None:
    """The same client as a command: the reply is the daemon's status."""
    result = subprocess.run(
        [sys.executable, "-m", "hotseam", "status", str(daemon.process.pid), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
        env=daemon.env,
    )
    reply = json.loads(result.stdout)
    assert reply["ok"] and reply["pid"] == daemon.process.pid
    assert [module["state"] for module in reply["modules"]] == ["active"]


def test_run_imports_its_serving_path_before_it_serves(daemon: Daemon) -> None:
    """What ``hotseam run`` has imported when its first question is answered: what serving
    needs, the ask tool's input models (pydantic) included — a daemon out of descriptors
    cannot import — and no web stack, terminal UI or ACP SDK, no watchfiles where inotify
    watches."""
    loaded = {name.partition(".")[0] for name in daemon.modules_at_first_answer}
    expected_out = {*WEB, "prompt_toolkit", "acp", "psycopg"}
    if NativeWatcher().backend == "inotify":
        expected_out.add("watchfiles")
    assert not loaded & expected_out
    assert {"pydantic", "structlog"} <= loaded  # structlog: the log lines are JSON
    assert "hotseam.interaction._inputs" in daemon.modules_at_first_answer


def test_the_ask_tool_serves_while_the_daemon_is_out_of_descriptors(daemon: Daemon) -> None:
    """Every descriptor taken, the agent's ask tool is called and described: it serves (the
    provider answers), and nothing was imported meanwhile. Its input models used to be
    imported at that first call: ``OSError: [Errno 24] Too many open files``."""
    result = daemon.out_of_descriptors
    assert result == {
        "held": result["held"],
        "output": {"answer": "fine", "option": None},
        "described": "ask_user_question",
    }
    assert isinstance(result["held"], int) and result["held"] > 0
    assert daemon.modules_after_the_tool == daemon.modules_at_first_answer


def test_serving_imports_nothing_after_the_first_answer(daemon: Daemon) -> None:
    """A status request, a reload request (a module executed again), the ask tool: the
    daemon holds the modules it held at its first answer, no more."""
    pid = str(daemon.process.pid)
    for command in (["status", pid, "--json"], ["reload", "--to", pid]):
        subprocess.run(
            [sys.executable, "-m", "hotseam", *command],
            capture_output=True,
            check=True,
            timeout=scaled(60),
            env=daemon.env,
        )
    daemon.process.send_signal(signal.SIGUSR1)
    assert set(json.loads(daemon.line())) == daemon.modules_at_first_answer


def test_run_imports_no_web_stack_terminal_ui_or_acp_sdk_without_web() -> None:
    """``hotseam run``/``dev`` without ``--web``: the web inbox's stack, prompt_toolkit,
    the ACP SDK and watchfiles (imported when a watch opens, and only without inotify)
    stay out, and so does pydantic (imported when a dict is parsed)."""
    code = "import hotseam.cli._run, hotseam.cli._dev\n"
    heavy = {name.partition(".")[0] for name in _imported(code, (*HEAVY, *WEB))} - {"hotseam"}
    assert heavy == {"structlog"}


WATCH_OPENED = """
import sys, tempfile
from pathlib import Path
import anyio
from hotseam.reload import NativeWatcher, WatchRoot


async def main(backend):
    with tempfile.TemporaryDirectory() as folder:
        async with NativeWatcher(backend=backend).open([WatchRoot(Path(folder) / "later")]):
            print("watchfiles" in sys.modules, flush=True)


anyio.run(main, sys.argv[1])
"""


@pytest.mark.parametrize(
    ("backend", "imported"),
    [
        ("watchfiles", True),
        pytest.param(
            "inotify",
            False,
            marks=pytest.mark.skipif(
                NativeWatcher().backend != "inotify", reason="inotify is Linux's"
            ),
        ),
    ],
)
def test_a_native_watch_imports_watchfiles_when_it_opens_only_where_it_uses_it(
    backend: str, imported: bool
) -> None:
    """The watchfiles backend imports watchfiles as its watch opens, even before the folder
    exists (later, descriptors may be short); inotify never imports it."""
    result = subprocess.run(
        [sys.executable, "-c", WATCH_OPENED, backend],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
    )
    assert result.stdout.split() == [str(imported)]


def test_the_ask_tool_loads_its_input_model_when_first_used() -> None:
    """Registering ``ask_user_question`` imports no pydantic; describing it does."""
    code = (
        "import sys\n"
        "from hotseam.interaction import ask_user_question_tool\n"
        "tool = ask_user_question_tool()\n"
        "assert 'pydantic' not in sys.modules\n"
        "schema = tool.definition()['input_schema']\n"
        "assert 'questions' in schema['properties'], schema\n"
        "assert tool.input_model.__module__ == 'hotseam.interaction', tool.input_model\n"
        "assert 'pydantic' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=scaled(60))


def test_the_cli_knows_the_web_inboxs_defaults_without_importing_it() -> None:
    from hotseam.cli import _web
    from hotseam.providers import web

    assert (_web.DEFAULT_HOST, _web.DEFAULT_PORT) == (web.DEFAULT_HOST, web.DEFAULT_PORT)


def test_help_imports_no_archive_module_through_shutil() -> None:
    """argparse imports shutil (and so zlib, bz2, lzma) only to ask the terminal's width;
    hotseam's formatter asks it directly: most of what --help cost beyond the import."""
    code = (
        "import contextlib, io, sys\n"
        "from hotseam.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    with contextlib.suppress(SystemExit):\n        main(['--help'])\n"
        "print(__import__('json').dumps(sorted({'shutil', 'lzma', 'bz2'} & set(sys.modules))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=scaled(60)
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(("columns", "width"), [("60", 60), ("", 80), ("junk", 80)])
def test_help_wraps_at_the_terminal_width(
    monkeypatch: pytest.MonkeyPatch, columns: str, width: int
) -> None:
    from hotseam.cli._help import terminal_columns

    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(os, "get_terminal_size", _not_a_terminal)
    assert terminal_columns() == width


def _not_a_terminal(fd: int = 1) -> os.terminal_size:
    raise OSError("not a terminal")
