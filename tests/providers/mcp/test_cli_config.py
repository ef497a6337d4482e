"""``hotseam mcp`` configured from ``[tool.hotseam]``, its web inbox as the fallback of a
host without elicitation, and bad input: one line on stderr, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp
import pytest
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

from hotseam.cli import main

from .test_cli_stdio import log_lines, write_tools

WAIT = 15.0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_configured_paths_and_the_web_inbox_fallback(tmp_path: Path) -> None:
    """``hotseam mcp`` alone, in a project whose [tool.hotseam] names the tools folder and
    turns the web inbox on: a host without elicitation gets the question answered in the
    inbox (its JSON API here), and the tool gets that answer."""
    write_tools(tmp_path / "tools")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.hotseam]\npaths = ["tools"]\nweb = true\nweb-port = 0\n'
    )
    stderr = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "hotseam", "mcp"], cwd=str(tmp_path)
    )
    results: list[Any] = []
    with stderr.open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog), mode="legacy") as client:

            async def call() -> None:
                results.append(await client.call_tool("pick", {}))

            async with anyio.create_task_group() as group, httpx.AsyncClient() as http:
                group.start_soon(call)
                url = await _inbox_url(stderr)
                token = parse_qs(urlsplit(url).query)["token"][0]
                base = url.split("?")[0].rstrip("/")
                headers = {"X-Hotseam-Token": token}
                with anyio.fail_after(WAIT):
                    while True:
                        listed = (await http.get(f"{base}/api/questions", headers=headers)).json()
                        if listed["questions"]:
                            break
                        await anyio.sleep(0.05)  # the call reaches the inbox
                (question,) = listed["questions"]
                answered = await http.post(
                    f"{base}/api/questions/{question['id']}/answer",
                    json={"option": 1},
                    headers=headers,
                )
                assert answered.status_code == 200, answered.text
    (result,) = results
    assert not result.is_error, result
    assert result.content[0].text == "SQLite"


async def _inbox_url(stderr: Path) -> str:
    with anyio.fail_after(WAIT):
        while True:
            for line in log_lines(stderr):
                if line.get("event") == "web.serving":
                    return str(line["url"])
            await anyio.sleep(0.05)  # written by the process: read it again


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["mcp", "no/such/folder"], "no/such/folder: no such file or directory"),
        (["mcp"], "no PATH given, and no 'paths' in a [tool.hotseam]"),
        (["mcp", ".", "--http-host", "::1"], "--http-host needs --http"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    arguments: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(arguments) == 2
    err = capsys.readouterr().err
    assert err.startswith("hotseam mcp: ")
    assert message in err
    assert err.count("\n") == 1
