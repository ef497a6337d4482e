"""A module file over the size limit is refused unread (issue 21, item 10).

``compile()`` holds the interpreter lock from start to end, even in the reloader's worker
thread: a generated module of a few megabytes froze the event loop for seconds (a 26 MB one
for 4 to 7 s). Such a file is refused from its ``stat``, reported like any failed load, and
the running generation keeps serving.
"""

from __future__ import annotations

import re
import signal
import textwrap
import time
from pathlib import Path

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from cli._support import Process  # the shared subprocess reader (tests/cli)
from hotseam import Context
from hotseam.cli import main
from hotseam.interaction import ask
from hotseam.reload import ModuleState, ReloadAborted, Reloader

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

_ROW = '    ("abcdefghij", 1234567, 6.5, None),\n'


def _table(size: int) -> str:
    """A generated module of about ``size`` bytes: one big literal, slow to compile."""
    return "DATA = [\n" + _ROW * (size // len(_ROW)) + "]\n"


class _Ticker:
    """Ticks every 10 ms and remembers the longest gap (a stalled event loop)."""

    longest = 0.0

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        last = time.perf_counter()
        task_status.started()
        while True:
            await anyio.sleep(0.01)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now


async def test_a_generated_module_over_the_limit_is_refused_and_the_loop_keeps_running(
    context: Context, folder: Path, probe: Probe
) -> None:
    """A 2 MiB table saved over a serving provider (compiling it took about 0.5 s with the
    loop frozen): refused unread, the old generation answers, and the loop never stalls."""
    ui = write(folder / "ui.py", provider_source(1))
    # Made before the ticker starts: dedenting 2 MiB on the loop stalls it 50-200 ms itself.
    table = textwrap.dedent(provider_source(2) + _table(2 * 1024 * 1024)).lstrip("\n")
    ticker = _Ticker()
    with anyio.fail_after(scaled(20)):
        async with (
            Reloader(context, [folder]) as reloader,
            reloader.events() as events,
            anyio.create_task_group() as tg,
        ):
            await tg.start(ticker.run)
            ui.write_text(table, encoding="utf-8")
            aborted = await events.next(ReloadAborted, module="ui")
            assert (await ask(QUESTION, context=context)).answer == "answer v1"
            tg.cancel_scope.cancel()
    assert (aborted.error.phase, aborted.error.type) == ("read", "ModuleTooLargeError")
    assert re.fullmatch(
        rf"{re.escape(str(ui))} is 2\.0 MiB \([\d,]+ bytes\), over the limit of 1 MiB for a "
        r"module file: compiling it would stall the event loop, so it is not loaded .*",
        aborted.error.message,
    )
    assert aborted.kept_generation == 1
    assert aborted.summary.endswith("; keeping generation 1")
    assert probe.entries("exec") == [1]
    assert ticker.longest < scaled(0.1), (
        f"the event loop stalled for {ticker.longest * 1000:.0f} ms"
    )


async def test_the_limit_is_the_reloaders_and_a_smaller_file_loads_again(
    context: Context, folder: Path, probe: Probe
) -> None:
    """``max_module_size=4096``: a 5,000-byte module (and a helper a provider imports) is
    refused; saved smaller, it loads."""
    ui = write(folder / "ui.py", provider_source(1))
    filler = "#" * 5000 + "\n"
    async with Reloader(context, [folder], watch=False, max_module_size=4096) as reloader:
        write(ui, provider_source(2) + filler)
        (aborted,) = (await reloader.reload(ui)).aborted
        assert "over the limit of 4 KiB for a module file" in aborted.error.message
        assert f"{ui} is 5." in aborted.error.message
        assert reloader.status_of(ui).generation == 1
        write(ui, provider_source(3))
        result = await reloader.reload(ui)
        assert [(c.module, c.generation) for c in result.committed] == [("ui", 2)]
        assert probe.entries("exec") == [1, 3]
        helper = write(folder / "helper.py", "X = 1\n" + filler)
        write(ui, "import helper\n" + provider_source(4))
        result = await reloader.reload()
        refused = {e.module: e.error for e in result.aborted}
        assert refused["helper"].type == "ModuleTooLargeError"
        assert f"cannot read {helper}" in refused["ui"].message
        assert "over the limit of 4 KiB" in refused["ui"].message
        assert reloader.status_of(ui).state is ModuleState.FAILED
        assert reloader.status_of(ui).generation == 2


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "1MiB"])
def test_the_limit_is_checked(context: Context, folder: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="max_module_size must be a number of bytes > 0"):
        Reloader(context, [folder], max_module_size=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["dev", "run"])
@pytest.mark.parametrize(
    ("arguments", "config", "message"),
    [
        (
            ["--max-module-size", "lots"],
            "",
            r"argument --max-module-size: expected a number of bytes > 0, or a size such as "
            r"512KiB or 2MiB, got 'lots'",
        ),
        (
            [],
            'max-module-size = "huge"',
            r"pyproject\.toml:3: \[tool\.hotseam\] max-module-size must be a number of bytes > 0,"
            r" or a size such as '512KiB' or '2MiB', got 'huge'",
        ),
        ([], "max-module-size = 0", r"max-module-size must be a number of bytes > 0"),
    ],
)
def test_a_bad_size_is_one_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    arguments: list[str],
    config: str,
    message: str,
) -> None:
    write(tmp_path / "providers" / "ui.py", "X = 1\n")
    write(tmp_path / "pyproject.toml", f"[tool.hotseam]\npaths = ['providers']\n{config}\n")
    monkeypatch.chdir(tmp_path)
    code: object
    try:
        code = main([command, *arguments])
    except SystemExit as exit_:  # argparse's usage error
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err


def test_run_refuses_a_module_over_the_configured_size_and_keeps_serving(
    tmp_path: Path,
) -> None:
    """``max-module-size = "2KiB"`` in ``[tool.hotseam]``, and a flag that wins over it: the
    real ``hotseam run`` refuses a 3,000-byte module with one error line, loads the rest,
    and keeps running."""
    write(tmp_path / "providers" / "ui.py", "X = 1\n")
    write(tmp_path / "providers" / "big.py", "X = 1\n" + "#" * 3000 + "\n")
    write(
        tmp_path / "pyproject.toml",
        "[tool.hotseam]\npaths = ['providers']\nmax-module-size = \"1MiB\"\n",
    )
    process = Process("run", "--max-module-size", "2KiB", cwd=tmp_path)
    try:
        process.expect(r'"loaded providers/ui\.py \(generation 1\)')
        line = process.expect(r'"failed to load providers/big\.py: ModuleTooLargeError: ')
        process.expect(r"hotseam run: watching providers")
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines["stderr"]
    assert "providers/big.py is 2.9 KiB (3,007 bytes), over the limit of 2 KiB" in line.string
    assert "anyio" not in line.string  # a refusal, not a crash: no frames of the thread hop
