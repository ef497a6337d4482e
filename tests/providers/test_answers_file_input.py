"""Hostile ``--answers`` files: one line naming the file (and line:column), never a traceback.

``ScriptedProvider.from_file`` raises ``ScriptError`` for anything a file can hold; the CLI
prints it as one line on stderr and exits 2.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests._timing import scaled

from hotseam.providers.scripted import ScriptedProvider, ScriptError

DEEP = b"[" * 100_000 + b"]" * 100_000

CASES = [
    pytest.param(
        b'["ok",\n "caf\xe9"]', r"answers.json:2:6: not UTF-8 text (byte 0xe9)", id="latin-1"
    ),
    pytest.param(
        b"\xff\xfe[\x00]\x00", r"answers.json:1:1: not UTF-8 text (byte 0xff)", id="utf-16"
    ),
    pytest.param(DEEP, "answers.json:1:65: nested more than 64 levels deep", id="deep-lists"),
    pytest.param(
        b'{"answers": [\n  {"text": ' + b'{"a": ' * 70 + b"1" + b"}" * 70 + b"}]}",
        "answers.json:2:",
        id="deep-objects",
    ),
    pytest.param(b"[" + b"9" * 5000 + b"]", "answers.json: not usable JSON", id="huge-number"),
    pytest.param(b'{"answers": 5}', "expected a list of answers or an object", id="shape"),
    pytest.param(b'[{"te\\nxt": 1}]', r"found te\nxt", id="newline-in-a-key"),
    pytest.param(
        b'[{"option": ["' + b"x" * 10_000 + b'\\n"]}]', "'option' must be", id="long-value"
    ),
]


@pytest.mark.parametrize(("content", "message"), CASES)
def test_from_file_raises_one_script_error_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """ScriptError with the file's name, where known its line:column, on one short line."""
    path = tmp_path / "answers.json"
    path.write_bytes(content)
    with pytest.raises(ScriptError) as caught:
        ScriptedProvider.from_file(path)
    text = str(caught.value)
    assert text.startswith(str(path))
    assert message in text
    assert "\n" not in text
    assert len(text) < 300 + len(str(path))


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    """Editors on Windows write one; it is not part of the JSON."""
    path = tmp_path / "answers.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(["Ada"]).encode())
    assert ScriptedProvider.from_file(path).name == "answers.json"


def test_nesting_up_to_the_limit_is_fine(tmp_path: Path) -> None:
    """The depth limit counts brackets outside strings only."""
    path = tmp_path / "answers.json"
    path.write_text(json.dumps([{"text": "[[[[" * 100}, "{{{{" * 100]))
    assert ScriptedProvider.from_file(path).name == "answers.json"


def test_a_device_that_never_ends_is_refused(tmp_path: Path) -> None:
    """``--answers /dev/zero``: read up to the size limit, then refused."""
    with pytest.raises(ScriptError, match="/dev/zero: the answers file is larger than 16 MiB"):
        ScriptedProvider.from_file("/dev/zero")


@pytest.mark.parametrize("command", ["run", "dev"])
@pytest.mark.parametrize(("content", "message"), CASES)
def test_the_cli_exits_2_with_one_line(
    tmp_path: Path, command: str, content: bytes, message: str
) -> None:
    """``hotseam run|dev DIR --answers FILE``: exit 2, one stderr line, no traceback."""
    path = tmp_path / "answers.json"
    path.write_bytes(content)
    (tmp_path / "providers").mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "hotseam", command, "providers", "--answers", "answers.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"hotseam {command}: answers.json")
    assert message in line
    assert result.stdout == ""


MULTI_AGENT = """
async def main(context):
    result = await context.tools.execute("ask_user_question", {"questions": [
        {"question": "Which database?", "header": "Database", "multiSelect": False,
         "options": [{"label": "Postgres", "description": "A server"}, {"label": "SQLite"}]},
        {"question": "Which features?", "header": "Features", "multiSelect": True,
         "options": [{"label": "auth"}, {"label": "billing"}, {"label": "search"}]},
        {"id": "notes", "question": "Anything else?", "allowSkip": True},
    ]})
    print(result.output if result.ok else result.error["code"], flush=True)
"""


@pytest.mark.parametrize(
    "answers",
    [
        [["Postgres", ["search", "auth"], {"skip": True}]],
        [{"q1": "Postgres", "q2": ["auth", "search"], "notes": {"skip": True}}],
    ],
    ids=["in-order", "by-id"],
)
def test_the_cli_answers_an_ask_of_several_questions_from_a_file(
    tmp_path: Path, answers: list[object]
) -> None:
    """``hotseam run --answers FILE``: Claude Code's shape answered per question, from a
    list in question order or an object keyed by question id; a list of choices for the
    multi-select question, {"skip": true} for the skippable one."""
    (tmp_path / "providers").mkdir()
    (tmp_path / "agent.py").write_text(MULTI_AGENT)
    (tmp_path / "answers.json").write_text(json.dumps({"answers": answers}))
    result = subprocess.run(
        [sys.executable, "-m", "hotseam", "run", "providers", "--agent", "agent.py",
         "--answers", "answers.json", "--no-journal"],
        cwd=tmp_path, capture_output=True, text=True, timeout=scaled(60), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    output = ast.literal_eval(result.stdout.strip())
    assert output["answers"] == {"Which database?": "Postgres", "Which features?": "auth, search"}
    assert [(q["id"], q["values"], q["skipped"]) for q in output["questions"]] == [
        ("q1", ["Postgres"], None),
        ("q2", ["auth", "search"], None),
        ("notes", [], "skipped"),
    ]
