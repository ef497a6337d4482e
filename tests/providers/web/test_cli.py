"""``hotseam run|dev PATH --web``: one stderr line with the URL; the agent is answered from it."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests._timing import scaled

from cli._support import Process, hotseam, write
from hotseam.cli import main
from hotseam.cli._web import web_options

AGENT = """
from hotseam import Agent

async def main(context):
    result = await context.tools.execute(
        "ask_user_question",
        {"question": "Which colour?", "options": [{"label": "Blue"}, {"label": "Green"}]},
        agent=Agent("painter", "Painter"),
    )
    print("answer:", result.output["answer"] if result.ok else result.error["code"], flush=True)
"""


def _hotseam(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("HOTSEAM_WEB_TOKEN", None)
    return subprocess.Popen(
        [sys.executable, "-m", "hotseam", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _url_line(process: subprocess.Popen[str]) -> tuple[str, list[str]]:
    """Read stderr until the line with the inbox's URL (bounded).

    Reads the descriptor itself: a text stream's ``readline`` buffers the lines after the
    one it returns, which ``select`` then no longer sees (a line logged right after
    another would wait for the deadline).
    """
    assert process.stderr is not None
    fd = process.stderr.fileno()
    deadline = time.monotonic() + scaled(20)
    lines: list[str] = []
    pending = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        lines.extend(raw.decode() + "\n" for raw in complete)
        for line in lines:
            if "web inbox: http://" in line:
                if pending:
                    lines.append(pending.decode())  # the rest of it comes with communicate()
                # a JSON log line (run) or a console one (dev): the URL ends at '"' or a space
                url = line.split("web inbox: ", 1)[1].split('"', 1)[0].split()[0]
                return url, lines
    raise AssertionError(f"no URL line on stderr: {lines}")


@pytest.mark.parametrize("command", ["run", "dev"])
def test_web_prints_the_url_and_answers_from_the_api(tmp_path: Path, command: str) -> None:
    (tmp_path / "providers").mkdir()
    (tmp_path / "my_agent.py").write_text(AGENT)
    process = _hotseam(
        command, "providers", "--agent", "my_agent.py", "--web", "--web-port", "0", cwd=tmp_path
    )
    try:
        url, lines = _url_line(process)
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url
        assert sum("web inbox: http://" in line for line in lines) == 1
        base, token = url.split("/?token=")
        with httpx.Client(base_url=base, headers={"x-hotseam-token": token}) as client:
            deadline = time.monotonic() + scaled(20)
            questions: list[dict[str, object]] = []
            while not questions and time.monotonic() < deadline:
                questions = client.get("/api/questions").json()["questions"]
                time.sleep(0.05)  # another process: nothing to await
            (question,) = questions
            assert [q["question"] for q in question["questions"]] == ["Which colour?"]
            reply = client.post(f"/api/questions/{question['id']}/answer", json={"option": 1})
            assert reply.status_code == 200
        out, err = process.communicate(timeout=scaled(20))
        assert "answer: Green" in out
        every = [*lines, *err.splitlines()]
        assert sum("web inbox: http://" in line for line in every) == 1, err
        # Besides the CLI's line, only the server's own web.serving event gives the URL.
        assert all(
            "web.serving" in line for line in every if token in line and "web inbox" not in line
        )
        assert process.returncode == 0, err
        assert token not in out
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=scaled(20))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--web-port", "8000"], "--web-port needs --web"),
        (["--web", "--web-host", "0.0.0.0"], "--web-allow-remote"),
        (["--web", "--web-host", "127.0.0.1:80"], "the port as --web-port"),
        (["--web", "--answers", "answers.json"], "choose one"),
        (["--web", "--web-token-file", "missing.txt"], "cannot read the web token"),
    ],
)
def test_bad_web_options_are_one_clear_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    (tmp_path / "providers").mkdir()
    (tmp_path / "answers.json").write_text('["yes"]')
    monkeypatch.chdir(tmp_path)
    assert main(["run", "providers", *args]) == 2  # found before anything starts
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_a_port_in_use_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    import socket

    (tmp_path / "providers").mkdir()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        process = _hotseam("run", "providers", "--web", "--web-port", port, cwd=tmp_path)
        out, err = process.communicate(timeout=scaled(30))
    assert process.returncode == 2, (out, err)
    assert "port is in use" in err and "Traceback" not in err


ASKING_AGENT = """
import anyio

async def main(context):
    result = await context.tools.execute(
        "ask_user_question",
        {"question": "Which colour?", "options": [{"label": "Blue"}, {"label": "Green"}]},
    )
    print("answer:", result.output["answer"] if result.ok else result.error["code"], flush=True)
    await anyio.sleep_forever()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_link_survives_a_restart_and_hotseam_status_shows_it(tmp_path: Path) -> None:
    """The options come from [tool.hotseam]; the token is kept (0600) in the state folder,
    so the URL printed, shown by 'hotseam status' and bookmarked is the same after a
    restart, and the bookmark opens the page with the question waiting."""
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()
    port = _free_port()
    write(
        tmp_path / "pyproject.toml",
        f"""
        [tool.hotseam]
        paths = ["providers"]
        agent = "agent.py"
        web = true
        web-port = {port}
        """,
    )
    runtime = tmp_path / "rt"
    urls: list[str] = []
    for start in range(2):
        process = Process("run", cwd=tmp_path, runtime=runtime)
        try:
            url = process.expect(r"web inbox: (http://\S+?)\"").group(1)
            urls.append(url)
            process.expect(r'"ask.started"')
            shown = hotseam("status", cwd=tmp_path, runtime=runtime)
            assert shown.returncode == 0, shown.stderr
            assert f"web inbox: {url} (1 waiting there)" in shown.stdout
            reply = json.loads(hotseam("status", "--json", cwd=tmp_path, runtime=runtime).stdout)
            assert [inbox["url"] for inbox in reply["web"]] == [url]
            bookmark = urls[0]  # the link of the first start, in a browser's bookmarks
            page = httpx.get(bookmark, headers={"accept": "text/html"}, timeout=scaled(10))
            assert page.status_code == 200 and "<title>hotseam inbox</title>" in page.text
            base, token = bookmark.split("/?token=")
            waiting = httpx.get(f"{base}/api/questions", headers={"x-hotseam-token": token})
            listed = waiting.json()["questions"]
            assert [[q["question"] for q in card["questions"]] for card in listed] == [
                ["Which colour?"]
            ]
        finally:
            process.finish(signal.SIGTERM)
        if start == 0:
            kept = Path(os.environ["XDG_STATE_HOME"]) / "hotseam" / "web-token"
            assert stat.S_IMODE(kept.stat().st_mode) == 0o600
            assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
            assert kept.read_text().strip() == urls[0].split("?token=")[1]
    assert urls[0] == urls[1]


def test_web_keys_in_tool_hotseam_are_checked_and_flags_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "providers").mkdir()
    (tmp_path / "a.json").write_text('["yes"]')
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "pyproject.toml"
    cases = [
        ('web = true\nweb-port = "8765"', [], "pyproject.toml:4: [tool.hotseam] web-port must be"),
        ("web = true\nanswers = 'a.json'", [], "both answer questions: choose one"),
        ("web = true", ["--answers", "a.json"], "--no-web turns the web inbox off"),
        ("web = true", ["--no-web", "--web-port", "1"], "--web-port needs --web (--no-web"),
        ("web = 1", [], "[tool.hotseam] web must be true or false"),
        ("web = true\nweb-token-file = 'missing'", [], "cannot read the web token from"),
    ]
    for table, flags, message in cases:
        config.write_text(f"[tool.hotseam]\npaths = ['providers']\n{table}\n")
        assert main(["run", *flags]) == 2, table
        out, err = capsys.readouterr()
        assert message in err, (table, err)
        assert len(err.strip().splitlines()) == 1 and out == ""
    config.write_text("[tool.hotseam]\nweb-token-file = 'token.txt'\n")
    (tmp_path / "token.txt").write_text("from-the-project-file-123\n")
    options = web_options(argparse.Namespace(web=True))
    assert options is not None and options.token == "from-the-project-file-123"
    assert options.token_file == str(tmp_path.resolve() / "token.txt")


WEB_MODULE = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.web import WebProvider

VERSION = {version}

def setup(scope):
    web = WebProvider.serve(scope, port=0)
    scope.provide(USER_INTERACTION, web)
"""


def test_dev_shows_the_url_of_an_inbox_a_provider_module_serves_once(tmp_path: Path) -> None:
    """``hotseam dev`` keeps its output to reload reports, but a provider module's inbox
    is unreachable without its URL (the token is in it): its first serving is shown, in
    one line; a reload of the module serves the same URL and adds no line."""
    (tmp_path / "providers").mkdir()
    module = tmp_path / "providers" / "inbox_ui.py"
    module.write_text(WEB_MODULE.format(version=1))
    (tmp_path / "my_agent.py").write_text(AGENT)
    process = Process("dev", "providers", "--agent", "my_agent.py", cwd=tmp_path)
    try:
        found = process.expect(r"web inbox: (http://\S+)")
        url = found.group(1)
        assert found.string.rstrip().endswith(f"web inbox: {url}")  # the summary alone
        module.write_text(WEB_MODULE.format(version=2))
        process.expect(r"inbox_ui\.py \(generation 2\)")
        base, token = url.split("/?token=")
        with httpx.Client(base_url=base, headers={"x-hotseam-token": token}) as client:
            deadline = time.monotonic() + scaled(20)
            questions: list[dict[str, object]] = []
            while not questions and time.monotonic() < deadline:
                questions = client.get("/api/questions").json()["questions"]
                time.sleep(0.05)  # another process: nothing to await
            (question,) = questions
            answered = client.post(f"/api/questions/{question['id']}/answer", json={"option": 0})
            assert answered.is_success
        process.expect("answer: Blue", stream="stdout")
    finally:
        code = process.finish(signal.SIGTERM)
    every = process.lines["stderr"]
    assert sum(url in line for line in every) == 1, every
    assert code == 0, every
