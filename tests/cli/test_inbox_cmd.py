"""``hotseam inbox``: its options and [tool.hotseam] keys, bad input, and a clean stop."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import anyio
import pytest

from cli._support import Process, write
from hotseam.cli import main
from hotseam.interaction import AskUserQuestionRequest
from hotseam.interaction._journal import open_journal
from hotseam.providers._web._journal_inbox import CLOSING_NOTE
from hotseam.providers._web._security import stored_token_path
from providers.web.conftest import open_events


@pytest.mark.parametrize(
    ("args", "config", "message"),
    [
        (["--journal", "mysql://db/x"], None, "unknown journal engine 'mysql'"),
        (["--web-host", "0.0.0.0"], None, "--web-allow-remote"),
        (["--web-host", "127.0.0.1:80"], None, "the port as --web-port"),
        (["--web-token-file", "missing.txt"], None, "cannot read the web token"),
        ([], "journal = 5", "[tool.hotseam] journal must be a non-empty string"),
        ([], "journal = 'sqlite://host/x'", "an SQLite file has no host"),
        ([], "web-allow-remote = 'yes'", "web-allow-remote must be true or false"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    config: str | None,
    message: str,
) -> None:
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(f"[tool.hotseam]\n{config}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["inbox", *args]) == 2  # found before anything starts
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_a_port_in_use_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        process = Process(
            "inbox", "--journal", str(tmp_path / "j.sqlite3"), "--web-port", port, cwd=tmp_path
        )
        assert process.finish() == 2
    errors = [line for line in process.lines["stderr"] if "hotseam inbox:" in line]
    assert len(errors) == 1 and "in use" in errors[0] and "--web-port" in errors[0]
    assert not any("Traceback" in line for line in process.lines["stderr"])


def test_a_journal_out_of_reach_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"postgresql://nobody@/hotseam?host={tmp_path}/no-server"
    process = Process("inbox", "--journal", url, "--web-port", "0", cwd=tmp_path)
    assert process.finish() == 1
    errors = [line for line in process.lines["stderr"] if "hotseam inbox:" in line]
    assert len(errors) == 1 and "no-server" in errors[0], process.lines["stderr"]
    assert not any("Traceback" in line for line in process.lines["stderr"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _record_an_ask(journal_path: Path) -> None:
    async with open_journal(journal_path) as journal:
        daemon = await journal.register_daemon("alpha", agent="deployer")
        run = await journal.start_run("deployer", daemon.id)
        await journal.record_ask("alpha-0", run.id, 0, AskUserQuestionRequest("Deploy?"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_journal_and_web_keys_are_read_and_a_stop_tells_open_pages(
    tmp_path: Path, signum: int
) -> None:
    """``journal`` (relative to the pyproject.toml) and ``web-port`` from the file, the kept
    token; the page hears a question recorded by another process; SIGTERM or Ctrl-C tells
    it the inbox stops, and the command exits 0."""
    port = _free_port()
    write(
        tmp_path / "pyproject.toml", f"[tool.hotseam]\njournal = 'j.sqlite3'\nweb-port = {port}\n"
    )
    (tmp_path / "sub").mkdir()
    process = Process("inbox", cwd=tmp_path / "sub")
    try:
        url = process.expect(r"web inbox: (http://\S+)").group(1)
    except AssertionError:
        process.finish(signal.SIGKILL)
        raise
    assert url.startswith(f"http://127.0.0.1:{port}/?token=")
    token = url.split("?token=", 1)[1]
    assert token == stored_token_path().read_text().strip()
    assert (tmp_path / "j.sqlite3").is_file()

    async def watch() -> list[dict[str, object]]:
        async with open_events(port, token) as events:
            assert (await events.next()) == {"type": "snapshot", "questions": []}
            await _record_an_ask(tmp_path / "j.sqlite3")
            added = await events.until(lambda e: e["type"] == "added")
            assert added["question"]["daemon"]["name"] == "alpha"  # type: ignore[index]
            await anyio.to_thread.run_sync(process.popen.send_signal, signum)
            return await events.rest()

    rest = anyio.run(watch)
    assert rest == [{"type": "closing", "note": CLOSING_NOTE}]
    assert process.finish() == 0, process.lines["stderr"]
    stderr = "\n".join(process.lines["stderr"])
    assert "Traceback" not in stderr and "shutting down" in stderr
