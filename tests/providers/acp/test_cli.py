"""``hotseam acp`` as a subprocess, driven by the SDK's own client over its stdio."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from ._harness import STARTUP, WAIT, ChatOnlyClient, Connected, rpc_error, spawned

AGENTS = Path(__file__).with_name("acp_test_agents.py")


def _import_bound() -> tuple[str, str]:
    """``--import-timeout``: the default 10 s, stretched by the suite's factor now. Importing
    the agent's module (the ACP SDK with it) or a watched one takes over 10 s at load 15 on
    2 cores, and hotseam acp then refuses to start (exit 2)."""
    return ("--import-timeout", f"{scaled(10.0):g}")


def _accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def _turn(acp: Connected, replies: list[Any], text: str = "go") -> tuple[str, str]:
    """One prompt whose questions get ``replies`` in turn; its stop reason and what was said."""
    before = len(acp.client.said())
    pending = acp.start_prompt(text)
    for reply in replies:
        request = await acp.next_request()
        if isinstance(reply, BaseException):
            request.fail(reply)
        else:
            request.answer(reply)
    response = await pending.result()
    return response.stop_reason, acp.client.said()[before:]


def _log_lines(path: Path) -> list[dict[str, Any]]:
    """stderr, every line of which must be a JSON log object."""
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.anyio
async def test_a_session_with_the_demo_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Accept, custom text, decline, cancel, malformed answers, a JSON-RPC error,
    session/cancel with a late answer, an incoming $/cancel_request: each turn as it should,
    one process throughout."""
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr, caplog.at_level(logging.WARNING):
        async with spawned(stderr=stderr) as acp:
            assert await _turn(
                acp, [_accept(answer="balanced"), _accept(answer="keep it small")], "fix the bug"
            ) == ("end_turn", "You asked: fix the bug\nApproach: balanced\nNotes: keep it small\n")

            first = acp.elicitations()[0]
            start = acp.client.tool_calls()[0]
            assert first["params"]["sessionId"] == acp.session_id
            assert first["params"]["toolCallId"] == start.tool_call_id
            schema = first["params"]["requestedSchema"]
            assert schema["type"] == "object"
            assert schema["title"] == "Approach"
            assert schema["properties"]["answer"]["default"] == "balanced"
            assert [o["title"] for o in schema["properties"]["answer"]["oneOf"]] == [
                "Quick fix",
                "Balanced (Recommended)",
                "Thorough",
                "Other (type it below)",
            ]
            assert schema["required"] == ["answer"]
            assert set(schema["properties"]) == {"answer", "custom"}
            assert '"requestedSchema":{"type":"object"' in "\n".join(acp.client_wire.raw_lines())

            stop, said = await _turn(
                acp,
                [_accept(answer="quick", custom="Rewrite it in Rust"), {"action": "decline"}],
            )
            assert said.startswith("You asked: go\nApproach: Rewrite it in Rust\n")
            assert "Notes: no answer (ASK_DECLINED: the human declined to answer" in said

            stop, said = await _turn(acp, [{"action": "cancel"}])
            assert "Approach: no answer (ASK_CANCELLED: the human dismissed the question" in said

            for reply, problem in [
                (_accept(answer=5), "content.answer must be a string, got number"),
                ({"action": "maybe"}, "action unknown action 'maybe' is not understood"),
                (_accept(answer="balanced", colour="red"), "content.colour was not asked for"),
            ]:
                stop, said = await _turn(acp, [reply])
                assert stop == "end_turn"
                assert "Approach: no answer (INVALID_ANSWER: " in said
                assert problem in said

            stop, said = await _turn(acp, [rpc_error(-32603, "Internal error", {"x": 1})])
            assert (
                "Approach: no answer (PROVIDER_FAILED: the ACP client answered "
                "elicitation/create with JSON-RPC error -32603: Internal error)" in said
            )

            pending = acp.start_prompt()
            open_question = await acp.next_request()
            open_id = acp.elicitations()[-1]["id"]
            await acp.conn.cancel(session_id=acp.session_id)
            assert (await pending.result()).stop_reason == "cancelled"
            await acp.client_wire.wait_for(
                "incoming",
                lambda m: (
                    m.get("method") == "$/cancel_request" and m["params"] == {"requestId": open_id}
                ),
            )
            open_question.answer(_accept(answer="balanced"))  # late: ignored by the agent

            await acp.cancel_request(12345)  # names nothing in progress
            assert await _turn(acp, [_accept(answer="thorough"), _accept(answer="none")]) == (
                "end_turn",
                "You asked: go\nApproach: thorough\nNotes: none\n",
            )
            process = acp.process
        assert process is not None
        assert process.returncode == 0
    logs = _log_lines(stderr_path)
    events = [line["event"] for line in logs]
    late = [line for line in logs if line["event"] == "acp.late_response_ignored"]
    assert [(line["request_id"], line["response"]) for line in late] == [
        (open_id, {"action": "accept"})
    ]
    ignored = [line for line in logs if line["event"] == "acp.cancel_request_ignored"]
    assert [line["request_id"] for line in ignored] == [12345]
    assert "acp.request_withdrawn" in events
    assert [line["code"] for line in logs if line["event"] == "ask.failed"].count(
        "ASK_CANCELLED"
    ) == 2  # the dismissed form, and the question open at session/cancel
    assert not [line for line in logs if line["level"] == "error"]
    assert "Method not found" not in stderr_path.read_text()
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


@pytest.mark.anyio
async def test_a_client_without_form_elicitation(tmp_path: Path) -> None:
    """The demo agent end to end on a client without form elicitation (Toad, the SDK by
    default): the question with options as a permission request, the free-form one in the
    conversation; no elicitation/create is ever sent."""
    with (tmp_path / "stderr.log").open("wb") as stderr:
        async with spawned(stderr=stderr, capabilities=None) as acp:
            pending = acp.start_prompt("fix the bug")
            request = await acp.next_request("session/request_permission")
            request.answer({"outcome": {"outcome": "selected", "optionId": "thorough"}})
            assert (await pending.result()).stop_reason == "end_turn"
            said = acp.client.said()
            assert said.startswith("You asked: fix the bug\nApproach: thorough\n")
            assert "**Notes**: Anything I should keep in mind?" in said
            mark = len(acp.client.updates)
            assert (await acp.prompt("keep it small")).stop_reason == "end_turn"
            assert acp.said_since(mark) == "Notes: keep it small\n"
            assert acp.elicitations() == []


@pytest.mark.anyio
async def test_a_client_that_refuses_permission_requests(tmp_path: Path) -> None:
    """The demo agent end to end on a client that answers session/request_permission with
    -32601 (and has no form elicitation): both questions are asked in the conversation, the
    one with options as a numbered list, and each next prompt answers one."""
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr:
        async with spawned(stderr=stderr, capabilities=None, client=ChatOnlyClient()) as acp:
            assert (await acp.prompt("fix the bug")).stop_reason == "end_turn"
            said = acp.client.said()
            assert "2. **Balanced (Recommended)**: Fix it and tidy what it touches\n" in said
            mark = len(acp.client.updates)
            assert (await acp.prompt("balanced")).stop_reason == "end_turn"
            said = acp.said_since(mark)
            assert said.startswith("Approach: balanced\n")
            assert "**Notes**: Anything I should keep in mind?" in said
            mark = len(acp.client.updates)
            assert (await acp.prompt("keep it small")).stop_reason == "end_turn"
            assert acp.said_since(mark) == "Notes: keep it small\n"
    logs = _log_lines(stderr_path)
    refused = [line for line in logs if line["event"] == "acp.permission_request_refused"]
    assert [line["level"] for line in refused] == ["warning"]
    assert not [line for line in logs if line["level"] == "error"]


@pytest.mark.anyio
async def test_an_agent_side_abort_and_a_stray_print(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """--agent: the agent aborts an open question ($/cancel_request, late answer ignored);
    its print() goes to stderr, never onto the protocol stream."""
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr, caplog.at_level(logging.WARNING):
        async with spawned(
            "--agent", f"{AGENTS}:abort_agent", *_import_bound(), stderr=stderr
        ) as acp:
            pending = acp.start_prompt()
            requests = [await acp.next_request(), await acp.next_request()]
            first, second = sorted(requests, key=lambda r: r.arguments["message"])
            assert first.arguments["message"] == "First?"
            (first_id,) = [
                m["id"] for m in acp.elicitations() if m["params"]["message"] == "First?"
            ]
            second.answer(_accept(answer="go"))
            await acp.client_wire.wait_for(
                "incoming",
                lambda m: (
                    m.get("method") == "$/cancel_request" and m["params"] == {"requestId": first_id}
                ),
            )
            first.answer(_accept(answer="too late"))
            assert (await pending.result()).stop_reason == "end_turn"
            assert acp.client.said() == "first: ASK_ABORTED; second: go"
            process = acp.process
        assert process is not None
        assert process.returncode == 0
    text = stderr_path.read_text()
    assert "stray print from the agent\n" in text
    late = [
        json.loads(line)
        for line in text.splitlines()
        if line.startswith("{") and "acp.late_response_ignored" in line
    ]
    assert [line["request_id"] for line in late] == [first_id]
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


CANNED = """\
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(default="canned v{version}"))
"""


@pytest.mark.anyio
async def test_watched_providers_shadow_the_acp_provider_and_hot_reload(tmp_path: Path) -> None:
    """--watch: a watched provider module answers instead of the client; editing it serves
    the new generation; deleting it hands the questions back to the ACP client (once the
    deletion grace has passed, as for dev and run)."""
    providers = tmp_path / "providers"
    providers.mkdir()
    module = providers / "canned.py"
    module.write_text(CANNED.format(version=1))
    async with spawned(
        "--watch", str(providers), "--deletion-grace", "0.2", *_import_bound(), stderr=None
    ) as acp:
        assert await _turn(acp, []) == (
            "end_turn",
            "You asked: go\nApproach: canned v1\nNotes: canned v1\n",
        )
        module.write_text(CANNED.format(version=2))
        await acp.wait_for_log(lambda e: e["event"] == "reload.committed" and e["generation"] == 2)
        assert (await _turn(acp, []))[1] == "You asked: go\nApproach: canned v2\nNotes: canned v2\n"
        module.unlink()
        await acp.wait_for_log(lambda e: e["event"] == "reload.unloaded")
        assert await _turn(acp, [_accept(answer="quick"), _accept(answer="ok")]) == (
            "end_turn",
            "You asked: go\nApproach: quick\nNotes: ok\n",
        )
        assert len(acp.elicitations()) == 2  # only after the watched provider was unloaded


@pytest.mark.anyio
async def test_watch_takes_the_reload_options_of_dev_and_run(tmp_path: Path) -> None:
    """--watch with the reloader options dev and run take: polled, under a deletion grace
    of 0.2 s, and a module over --max-module-size refused, naming the file and the limit."""
    providers = tmp_path / "providers"
    providers.mkdir()
    (providers / "canned.py").write_text(CANNED.format(version=1))
    big = providers / "big.py"
    big.write_text("def setup(scope):\n    pass\n" + "#" * 2048 + "\n")
    flags = ["--polling", "--deletion-grace", "0.2", "--max-module-size", "1KiB"]
    async with spawned("--watch", str(providers), *flags, *_import_bound(), stderr=None) as acp:
        serving = await acp.wait_for_log(lambda e: e["event"] == "acp.serving")
        refused = await acp.wait_for_log(lambda e: e["event"] == "reload.aborted")
        assert (await _turn(acp, []))[1] == "You asked: go\nApproach: canned v1\nNotes: canned v1\n"
    assert refused["path"] == str(big)
    assert refused["error_type"] == "ModuleTooLargeError"
    assert "over the limit of 1 KiB for a module file" in refused["error"]
    assert serving["watcher"].startswith("PollingWatcher(interval=0.3")
    assert serving["deletion_grace"] == 0.2


SLOW_AGENT = """
import time

time.sleep(60)


async def main(context):
    pass
"""


TIMEOUT = ("--import-timeout", "0.3")


def test_the_agents_module_is_bounded_by_the_import_timeout(tmp_path: Path) -> None:
    """--agent whose module body sleeps: abandoned after --import-timeout (in a worker
    thread, as dev and run do), one line naming the line it is stuck at, exit 2."""
    agent = tmp_path / "slow_agent.py"
    agent.write_text(SLOW_AGENT)
    completed = subprocess.run(
        [sys.executable, "-m", "hotseam", "acp", "--agent", f"{agent}:main", *TIMEOUT],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=scaled(WAIT * 2),
        check=False,
    )
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr == (
        f"hotseam acp: --agent '{agent}:main': executing {agent} did not finish within 0.3 s "
        f"(stuck at {agent}:4); abandoned: its thread runs on, and nothing it creates is used\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", ":main"], "--agent ':main': expected MODULE[:FUNCTION]"),
        (
            ["--agent", "no_such_module_hotseam:agent"],
            "importing no_such_module_hotseam failed: ModuleNotFoundError",
        ),
        (["--agent", "json:dumps"], "dumps must be 'async def dumps(context)'"),
        (["--watch", "/no/such/path"], "--watch /no/such/path: no such file or directory"),
        (["--watch", "/etc/hostname"], "--watch: "),
    ],
)
def test_bad_arguments_one_line_and_exit_2(args: list[str], message: str) -> None:
    """One clear line on stderr, nothing on stdout, exit code 2; never a traceback."""
    completed = subprocess.run(
        [sys.executable, "-m", "hotseam", "acp", *args],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=scaled(WAIT * 2),
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("hotseam acp: ")
    assert message in lines[0]


def test_stdin_from_a_file_is_a_usage_error(tmp_path: Path) -> None:
    """ACP runs over pipes; a regular file on stdin is said plainly."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text("{}\n")
    with requests.open("rb") as stdin:
        completed = subprocess.run(
            [sys.executable, "-m", "hotseam", "acp"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=scaled(WAIT * 2),
            check=False,
        )
    assert completed.returncode == 2
    assert completed.stderr == (
        "hotseam acp: stdin is a file; an ACP client launches 'hotseam acp' with pipes "
        "(or try it in a terminal)\n"
    )


@pytest.mark.anyio
async def test_sigterm_exits_0_and_stdout_is_protocol_only(tmp_path: Path) -> None:
    """Raw stdio: every stdout line is a JSON-RPC message; SIGTERM ends the process with 0."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {"elicitation": {"form": {}}}},
    }
    with (tmp_path / "stderr.log").open("wb") as stderr:
        async with await anyio.open_process(
            [sys.executable, "-m", "hotseam", "acp", "--log-level", "debug"], stderr=stderr
        ) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send((json.dumps(initialize) + "\n").encode())
            received = b""
            with anyio.fail_after(scaled(STARTUP)):
                while not received.endswith(b"\n"):
                    received += await process.stdout.receive()
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(scaled(WAIT)):
                assert await process.wait() == 0
            async for chunk in process.stdout:
                received += chunk
    lines = received.decode().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [1]
    response = json.loads(lines[0])
    assert response["result"]["protocolVersion"] == 1
    assert response["result"]["agentInfo"]["name"] == "hotseam"
    logs = _log_lines(tmp_path / "stderr.log")
    # initialize is answered before the SDK is imported (cli/_early.py): a SIGTERM right
    # after the answer may stop the agent before its SDK read the request (acp.initialized).
    assert {"acp.signal", "acp.stopped"} <= {line["event"] for line in logs}
