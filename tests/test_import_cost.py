"""``import hotseam`` and ``hotseam --help`` import none of the heavy dependencies, and each
command imports only what it uses.

structlog (~40 ms), pydantic (~55 ms), prompt_toolkit, the ACP SDK, watchfiles and the web
stack (Starlette and Hypercorn, ~25 ms) are imported where they are used; this keeps that
from regressing silently. ``hotseam status`` and ``reload`` import none of them (they only
talk to a socket), ``hotseam run`` and ``dev`` no web stack without ``--web``, no terminal UI,
no ACP SDK and no watchfiles where inotify watches. Each check runs in a fresh interpreter,
since this test process has imported everything long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("prompt_toolkit", "pydantic", "structlog", "acp", "watchfiles")
WEB = ("starlette", "hypercorn", "h11", "h2", "wsproto")

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
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    imported: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return imported


def test_import_hotseam_imports_no_heavy_dependency() -> None:
    assert _imported("import hotseam") == []


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


@pytest.mark.parametrize("command", ["status", "reload"])
def test_status_and_reload_import_neither_pydantic_nor_structlog(command: str) -> None:
    """The socket's clients: everything they need is the standard library's and hotseam's
    own (its core brings anyio); the request model and the log setup are the server's."""
    code = f"import hotseam.cli._{'reload_cmd' if command == 'reload' else command}\n"
    heavy = {name.partition(".")[0] for name in _imported(code, (*HEAVY, *WEB))}
    assert heavy == {"hotseam"}


def test_run_imports_no_web_stack_terminal_ui_or_acp_sdk_without_web() -> None:
    """``hotseam run``/``dev`` without ``--web``: the web inbox's stack, prompt_toolkit,
    the ACP SDK and watchfiles (imported when a watch opens, and only without inotify)
    stay out."""
    code = "import hotseam.cli._run, hotseam.cli._dev\n"
    heavy = {name.partition(".")[0] for name in _imported(code, (*HEAVY, *WEB))} - {"hotseam"}
    assert heavy <= {"pydantic", "structlog"}


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
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
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
