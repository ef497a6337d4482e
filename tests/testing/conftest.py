"""Planted defects, run once as a user's suite runs them: one pytest subprocess with the
leak check and the escape check on, on asyncio and trio; each test of this folder reads the
report of its own defect from the output."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests._timing import scaled

PLANTED = Path(__file__).parent / "planted"

USERS_TESTS = """
import socket
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

PLANTED = {planted!r}
sys.path.insert(0, PLANTED + "/shared")  # long-lived helpers, imported the ordinary way


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


@pytest.mark.anyio
async def test_listener(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/listener")
    (await hotseam_reloader.reload(None, force=True)).raise_for_errors()


@pytest.mark.anyio
async def test_watched_listener(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/watched_listener")
    (await hotseam_reloader.reload("watched_listener_ui.py", force=True)).raise_for_errors()


@pytest.fixture
def tracing():
    import tracemalloc

    tracemalloc.start()
    yield
    tracemalloc.stop()


@pytest.mark.anyio
async def test_watched_listener_traced(tracing, hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/watched_listener")
    (await hotseam_reloader.reload("watched_listener_ui.py", force=True)).raise_for_errors()


@pytest.mark.anyio
async def test_cache(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/cache")
    (await hotseam_reloader.reload(None, force=True)).raise_for_errors()


@pytest.mark.anyio
async def test_carried(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/carried")


@pytest.mark.anyio
async def test_copied_by_hand(hotseam_reloader):
    import shutil

    hotseam_reloader.came_from(PLANTED + "/open_socket")  # where the copy comes from
    copy = hotseam_reloader.path("open_socket_ui.py")
    shutil.copy(PLANTED + "/open_socket/open_socket_ui.py", copy)
    (await hotseam_reloader.reload("open_socket_ui.py")).raise_for_errors()


@pytest.mark.anyio
async def test_growth(asyncio_only, hotseam_reloader):
    from hotseam.testing import assert_reload_stable

    await hotseam_reloader.load_folder(PLANTED + "/history")
    await assert_reload_stable(hotseam_reloader, "history_ui.py", reloads=3, warmup=1)  # MINE
    import planted_cache
    planted_cache._providers.clear()


@pytest.fixture(scope="module")
def module_server():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield thread
    stop.set()
    thread.join()


def test_a_module_fixtures_thread_is_not_the_tests(module_server):
    assert module_server.is_alive()


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers())
@pytest.mark.anyio
async def test_hypothesis_runs_a_loop_per_example(anyio_backend, value):
    pass


def test_scope_dropped():
    from hotseam import Scope

    Scope("dropped")  # DROPPED-HERE


KEPT = []


@pytest.mark.anyio
@pytest.mark.hotseam_allow_leaks("threads", "generations")
async def test_allowed_by_marker(hotseam_reloader):
    await hotseam_reloader.load_folder(PLANTED + "/stray_thread")


def test_allowed_by_fixture(hotseam_allow_leaks):
    sock = socket.socket()
    KEPT.append(sock)
    hotseam_allow_leaks(sock)


@pytest.mark.anyio
async def test_clean(hotseam_scope, hotseam_reloader):
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
    hotseam_reloader.write("clean_ui.py", "def setup(scope):\\n    pass\\n")
    (await hotseam_reloader.reload("clean_ui.py")).raise_for_errors()
    (await hotseam_reloader.reload("clean_ui.py", force=True)).raise_for_errors()
"""


@pytest.fixture(scope="session")
def planted_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The teardown report of each users' test that failed (by test id), and the summary.

    Once per run, not once per pytest-xdist worker: the users' run takes a few seconds of
    CPU, so the first worker that needs it runs it and leaves the report in the run's
    temporary folder (shared by the workers: --basetemp's parent) for the others, which wait
    for it under a lock."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    report = root / "planted-report.json"
    with (root / "planted-report.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if report.exists():
            found: dict[str, str] = json.loads(report.read_text(encoding="utf-8"))
            return found
        found = _run_the_users_tests(tmp_path_factory)
        report.write_text(json.dumps(found), encoding="utf-8")
        return found


def _run_the_users_tests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("planted")
    (folder / "test_users.py").write_text(USERS_TESTS.format(planted=str(PLANTED)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_users.py",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            "-rN",
            # its own temporary folders: under the default one, pytest would remove the
            # oldest of the user's earlier runs there (thousands of folders, seconds)
            f"--basetemp={folder / 'tmp'}",
            "--hotseam-leak-check",
            "--hotseam-escape-check",
            "-W",
            "always::ResourceWarning",  # Python ignores them unless told
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    output = done.stdout + done.stderr
    sections = re.split(r"_+ (?:ERROR at teardown of )?(test_\S+) _+", output)
    found = dict(zip(sections[1::2], sections[2::2], strict=True))
    found["<summary>"] = done.stdout.splitlines()[-1]
    found["<all>"] = output
    return found


def planted_line(defect: str, name: str | None = None) -> str:
    """``path:line`` of the line marked ``# PLANTED`` in the planted provider."""
    path = PLANTED / defect / (name or f"{defect}_ui.py")
    lines = path.read_text(encoding="utf-8").splitlines()
    line = next(number for number, text in enumerate(lines, 1) if "# PLANTED" in text)
    return f"{path}:{line}"
