"""The escape check on planted defects: each provider in ``planted/`` leaves one thing
behind, and the report names it and the line of the planted file that created it.

The users' tests run once, in one pytester subprocess (on asyncio and trio), and each test
here reads its own section of the output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ._users import run_users_tests

PLANTED = Path(__file__).parent / "planted"

USERS_TESTS = """
import asyncio
import socket
import threading

import pytest

PLANTED = {planted!r}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.fixture
def asyncio_only(anyio_backend):
    if anyio_backend != "asyncio":
        pytest.skip("an asyncio task or timer")


@pytest.mark.anyio
async def test_orphan_task(asyncio_only, hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/orphan_task")


@pytest.mark.anyio
async def test_pending_timer(asyncio_only, hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/pending_timer")


@pytest.mark.anyio
async def test_stray_thread(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/stray_thread")


@pytest.mark.anyio
async def test_open_socket(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/open_socket")


KEPT = []


@pytest.mark.anyio
@pytest.mark.hotseam_allow_leaks("threads")
async def test_allowed_by_marker(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/stray_thread")


def test_allowed_by_fixture(hotseam_allow_leaks):
    sock = socket.socket()
    KEPT.append(sock)
    hotseam_allow_leaks(sock)


@pytest.mark.anyio
async def test_clean(hotseam_scope):
    done = threading.Event()
    thread = threading.Thread(target=done.set)
    thread.start()
    thread.join()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
    async def work():
        pass

    async with hotseam_scope.child("worker") as worker:
        worker.spawn(work)
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the users' tests once with the escape check; the output of each failing test."""
    output = run_users_tests(
        tmp_path_factory.mktemp("escapes"),
        USERS_TESTS.format(planted=str(PLANTED)),
        "--hotseam-escape-check",
    )
    sections = re.split(r"_+ ERROR at teardown of (\S+) _+", output)
    found = dict(zip(sections[1::2], sections[2::2], strict=True))
    found["<summary>"] = output.splitlines()[-1]
    return found


def planted_line(defect: str) -> str:
    """``path:line`` of the line marked ``# PLANTED`` in the planted provider."""
    path = PLANTED / defect / f"{defect}_ui.py"
    lines = path.read_text(encoding="utf-8").splitlines()
    line = next(number for number, text in enumerate(lines, 1) if "# PLANTED" in text)
    return f"{path}:{line}"


def test_an_orphan_task_is_named_with_its_create_task_line(report: dict[str, str]) -> None:
    text = report["test_orphan_task[asyncio]"]
    assert "==== escape 1/1: asyncio task 'Task-" in text
    assert "running poll() ====" in text
    assert f"created at: {planted_line('orphan_task')} (in setup)" in text
    assert "still pending when its event loop shut down" in text
    assert "test_orphan_task[trio]" not in report


def test_a_pending_timer_is_named_with_its_call_later_line(report: dict[str, str]) -> None:
    text = report["test_pending_timer[asyncio]"]
    assert "timer handle calling refresh()" in text
    assert f"created at: {planted_line('pending_timer')} (in setup)" in text
    assert "neither run nor cancelled" in text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_thread_never_joined_is_named_with_its_start_line(
    report: dict[str, str], backend: str
) -> None:
    text = report[f"test_stray_thread[{backend}]"]
    assert "thread 'stray-server' running serve()" in text
    assert f"created at: {planted_line('stray_thread')} (in setup)" in text
    assert "still alive after the test (never stopped and joined) (daemon)" in text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_unclosed_socket_is_named_with_its_creating_line(
    report: dict[str, str], backend: str
) -> None:
    text = report[f"test_open_socket[{backend}]"]
    assert re.search(
        r"socket \(fd \d+, AF_INET/SOCK_STREAM bound to \('127\.0\.0\.1', \d+\)\)", text
    )
    assert f"created at: {planted_line('open_socket')} (in setup)" in text
    assert "1 resource(s) created during this test outlived it" in text


def test_the_report_names_the_users_file_not_the_temporary_copy(report: dict[str, str]) -> None:
    text = report["test_open_socket[asyncio]"]
    assert str(PLANTED / "open_socket") in text
    assert "/providers/open_socket_ui.py" not in text  # the copy in tmp_path


def test_allowed_and_clean_tests_pass(report: dict[str, str]) -> None:
    for name in report:
        assert not name.startswith(("test_allowed", "test_clean")), report[name]
    # 4 failing on asyncio, 2 on trio; 2 skipped; allowed (x2 backends + 1) and clean pass
    assert re.search(r"6 errors", report["<summary>"]), report["<summary>"]
    assert re.search(r"2 skipped", report["<summary>"]), report["<summary>"]
