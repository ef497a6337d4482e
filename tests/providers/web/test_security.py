"""Who may use the inbox: the token everywhere, Host and Origin checks, no CSRF, escaping."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import httpx
import pytest
import structlog

from hotseam.providers._web import _security
from hotseam.providers._web._app import Guard, build_app
from hotseam.providers._web._security import HostPolicy, load_token, token_matches
from hotseam.providers.web import TOKEN_ENV, TOKEN_FILE_ENV

from .conftest import DB, FREE, Served, answer_of, open_events, serving

pytestmark = pytest.mark.anyio

ROUTES = [
    ("GET", "/"),
    ("GET", "/api/questions"),
    ("GET", "/api/events"),
    ("POST", "/api/questions/x/answer"),
    ("POST", "/api/questions/x/dismiss"),
    ("POST", "/api/questions/x/clear"),
    ("GET", "/api/rules"),
    ("POST", "/api/rules/x/revoke"),
]


async def test_every_route_of_the_app_is_in_the_guard_tests() -> None:
    """A route added to the app (either inbox's: they share it) is checked below too."""
    app = build_app(lambda: None, "a-token-of-enough-length", HostPolicy("127.0.0.1", 1))
    assert isinstance(app, Guard)
    served = {
        (method, route.path.replace("{question_id}", "x").replace("{rule_id}", "x"))
        for route in app._app.routes  # type: ignore[attr-defined]
        for method in route.methods - {"HEAD"}
    }
    assert served == set(ROUTES)


async def test_every_request_needs_the_token() -> None:
    async with serving() as s, httpx.AsyncClient(base_url=s.base) as bare:
        for method, path in ROUTES:
            for token in (None, "", "wrong-token-of-some-length", "x", s.web.token[:-1]):
                params = {} if token is None else {"token": token}
                headers = {"content-type": "application/json"}
                if token is not None:
                    headers["x-hotseam-token"] = token
                response = await bare.request(
                    method, path, params=params, headers=headers, content=b"{}"
                )
                assert response.status_code == 401, (method, path, token, response.text)
                assert response.json()["error"]["code"] == "BAD_TOKEN"


async def test_the_token_is_accepted_in_the_query_for_reads_and_as_bearer() -> None:
    async with serving() as s, httpx.AsyncClient(base_url=s.base) as bare:
        assert (await bare.get("/", params={"token": s.web.token})).status_code == 200
        bearer = {"authorization": f"Bearer {s.web.token}"}
        assert (await bare.get("/api/questions", headers=bearer)).status_code == 200


async def test_a_state_change_with_the_token_only_in_the_query_is_refused() -> None:
    """A cross-site page can put a token-bearing URL in a form; it cannot set a header."""
    async with serving() as s, httpx.AsyncClient(base_url=s.base) as bare:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        response = await bare.post(
            f"/api/questions/{question['id']}/answer",
            params={"token": s.web.token},
            json={"option": 0},
        )
        assert response.status_code == 401
        assert s.web.pending == 1


async def test_simple_cross_site_request_bodies_are_refused() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        for content_type in (
            "application/x-www-form-urlencoded",
            "text/plain",
            "multipart/form-data; boundary=x",
            None,
        ):
            headers = {} if content_type is None else {"content-type": content_type}
            for action in ("answer", "dismiss", "clear"):
                response = await s.client.post(
                    f"/api/questions/{question['id']}/{action}",
                    content=b'{"option": 0}',
                    headers=headers,
                )
                assert response.status_code == 415, content_type
        assert s.web.pending == 1


async def test_an_unexpected_host_is_refused_against_dns_rebinding() -> None:
    async with serving() as s:
        for host in (
            "evil.example",
            "evil.example:{port}",
            "127.0.0.1:1",
            "localhost.evil.example:{port}",
            "127.0.0.2:{port}",
            "",
        ):
            for path in ("/", "/api/questions", "/api/events"):
                response = await s.client.get(
                    path,
                    params={"token": s.web.token},
                    headers={"host": host.format(port=s.web.port)},
                )
                assert response.status_code == 421, (host, path)
                assert response.json()["error"]["code"] == "BAD_HOST"
        for host in ("127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"):
            response = await s.client.get(
                "/api/questions", headers={"host": host.format(port=s.web.port)}
            )
            assert response.status_code == 200, host


async def test_a_foreign_origin_is_refused() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        for origin in FOREIGN_ORIGINS:
            await _refused_from(s, question["id"], origin)


FOREIGN_ORIGINS = (
    "http://evil.example",
    "null",
    "http://127.0.0.1:1",
    "https://127.0.0.1:{port}",
    "http://localhost:{port}/x",
)


async def _refused_from(s: Served, question_id: str, origin: str) -> None:
    shown = origin.format(port=s.web.port)
    response = await s.client.post(
        f"/api/questions/{question_id}/answer", json={"option": 0}, headers={"origin": shown}
    )
    assert response.status_code == 403, origin
    assert response.json()["error"]["code"] == "BAD_ORIGIN"
    assert s.web.pending == 1
    stream = await s.client.get(
        "/api/events", params={"token": s.web.token}, headers={"origin": shown}
    )
    assert stream.status_code == 403


async def test_the_pages_own_origin_is_accepted() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        response = await s.client.post(
            f"/api/questions/{question['id']}/answer",
            json={"option": 0},
            headers={"origin": f"http://127.0.0.1:{s.web.port}", "sec-fetch-site": "same-origin"},
        )
        assert response.status_code == 200
        assert answer_of(await s.result("db")).answer == "pg"


async def test_a_cross_site_fetch_is_refused_by_sec_fetch_site() -> None:
    async with serving() as s:
        response = await s.client.get("/api/questions", headers={"sec-fetch-site": "cross-site"})
        assert response.status_code == 403


async def test_every_response_carries_the_protective_headers() -> None:
    async with serving() as s:
        for response in (
            await s.client.get("/", params={"token": s.web.token}),
            await s.client.get("/api/questions"),
            await s.client.get("/api/questions", headers={"x-hotseam-token": "nope"}),
        ):
            headers = response.headers
            assert "default-src 'none'" in headers["content-security-policy"]
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert headers["x-frame-options"] == "DENY"
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] == "no-referrer"
            assert headers["cache-control"] == "no-store"
            assert "access-control-allow-origin" not in headers


async def test_the_page_loads_nothing_from_outside_and_holds_no_model_text() -> None:
    """Questions reach the page only as JSON, rendered with textContent (see the browser
    tests for a <script> question shown as text)."""
    async with serving() as s:
        s.ask_soon("db", DB)
        await s.pending(1)
        page = (await s.client.get("/", params={"token": s.web.token})).text
        assert "Which database?" not in page
        assert "http://" not in page and "https://" not in page and "//cdn" not in page
        assert "<script nonce=" in page and "src=" not in page


async def test_model_text_travels_as_json_strings_unchanged() -> None:
    from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest

    hostile = AskUserQuestionRequest(
        "<script>alert(1)</script>?",
        header="<img src=x onerror=alert(2)>",
        options=(AskUserQuestionOption("</li><b>x</b>", description='"><svg onload=alert(3)>'),),
    )
    async with serving() as s:
        s.ask_soon("x", hostile)
        (question,) = await s.pending(1)
        (item,) = question["questions"]
        assert item["question"] == "<script>alert(1)</script>?"
        assert item["header"] == "<img src=x onerror=alert(2)>"
        assert item["options"][0]["label"] == "</li><b>x</b>"


async def test_answer_texts_are_never_logged_above_debug() -> None:
    secret = "my-secret-answer-4711"
    async with serving() as s:
        s.ask_soon("free", FREE)
        (question,) = await s.pending(1)
        with structlog.testing.capture_logs() as logs:
            assert (await s.answer(question["id"], {"text": secret})).status_code == 200
            assert answer_of(await s.result("free")).answer == secret
            bad = await s.answer(question["id"], {"text": secret})
            assert bad.status_code == 409
    loud = [entry for entry in logs if entry["log_level"] != "debug"]
    assert all(secret not in repr(entry) for entry in loud), loud


async def test_a_token_from_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-the-environment-123")
    async with serving() as s:
        assert s.web.token == "from-the-environment-123"
        assert s.web.url.endswith("?token=from-the-environment-123")
    monkeypatch.delenv(TOKEN_ENV)
    token_file = tmp_path / "token"  # type: ignore[operator]
    token_file.write_text("from-a-file-0123456789\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(token_file))
    async with serving() as s:
        assert s.web.token == "from-a-file-0123456789"


async def test_the_default_token_is_kept_owner_only_and_the_same_at_the_next_start() -> None:
    kept = Path(os.environ["XDG_STATE_HOME"]) / "hotseam" / "web-token"
    assert not kept.exists()
    async with serving() as first:
        token = first.web.token
    assert len(token) >= 32 and kept.read_text() == token + "\n"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    _security._STORED.clear()  # what a new process starts with
    async with serving() as second:
        assert second.web.token == token
    kept.unlink()  # the way to get a new token
    _security._STORED.clear()
    async with serving() as third:
        assert third.web.token != token and kept.read_text() == third.web.token + "\n"


async def test_a_kept_token_others_could_read_or_replace_is_refused_clearly() -> None:
    kept = Path(os.environ["XDG_STATE_HOME"]) / "hotseam" / "web-token"
    load_token()
    kept.chmod(0o644)
    _security._STORED.clear()
    with pytest.raises(ValueError, match=r"can be read by other users \(mode 644\).*chmod 600"):
        load_token()
    kept.unlink()
    kept.symlink_to(kept.parent / "elsewhere")
    with pytest.raises(ValueError, match="a symbolic link is refused"):
        load_token()
    kept.unlink()
    kept.write_text("short\n")
    kept.chmod(0o600)
    with pytest.raises(ValueError, match="delete the file to make a new token"):
        load_token()
    kept.unlink()
    kept.parent.chmod(0o777)
    with pytest.raises(ValueError, match="can be written by other users"):
        load_token()


async def test_a_state_folder_that_cannot_be_written_warns_and_uses_a_process_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
    with structlog.testing.capture_logs() as logs:
        token = load_token()
    assert token == _security.process_token()
    (warning,) = [entry for entry in logs if entry["log_level"] == "warning"]
    assert "cannot be kept across restarts" in warning["summary"]
    assert "--web-token-file" in warning["summary"]


async def test_a_browser_refused_the_page_is_told_what_happened_and_what_to_do() -> None:
    """A stale bookmark or a cut link: a page in words (401 still), never raw JSON; a
    script (no text/html in Accept) and the API keep the JSON error."""
    browser = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    async with serving() as s, httpx.AsyncClient(base_url=s.base) as bare:
        wrong = await bare.get("/", params={"token": "an-old-token-0123456789"}, headers=browser)
        assert wrong.status_code == 401
        assert wrong.headers["content-type"].startswith("text/html")
        assert wrong.headers["x-hotseam-error"] == "BAD_TOKEN"
        assert "<script" not in wrong.text and "an-old-token" not in wrong.text
        assert "This link&#x27;s token is not accepted" in wrong.text
        assert "started again with another token" in wrong.text
        assert "<code>hotseam status</code>" in wrong.text
        assert "script-src" not in wrong.headers["content-security-policy"]
        missing = await bare.get("/", headers=browser)
        assert missing.status_code == 401 and "has no ?token=" in missing.text
        host = await bare.get(
            "/", params={"token": s.web.token}, headers={**browser, "host": "evil.example"}
        )
        assert host.status_code == 421 and "does not name the inbox" in host.text
        for path, headers in (("/", {}), ("/api/questions", browser)):
            script = await bare.get(path, params={"token": "x"}, headers=headers)
            assert script.status_code == 401
            assert script.json()["error"]["code"] == "BAD_TOKEN"


async def test_a_weak_or_mangled_token_is_refused_clearly() -> None:
    for token in ("short", "has spaces in it, sadly", "ünïcödé-token-long-enough"):
        with pytest.raises(ValueError, match="at least 16 characters"):
            async with serving(token=token):
                pass


async def test_an_unreadable_token_file_is_a_clear_error(tmp_path: pytest.TempPathFactory) -> None:
    with pytest.raises(ValueError, match="cannot read the web token"):
        async with serving(token_file=tmp_path / "missing"):  # type: ignore[operator]
            pass


def test_tokens_are_compared_in_constant_time_with_hmac() -> None:
    assert token_matches("a" * 20, "a" * 20)
    assert not token_matches("a" * 20, "a" * 19 + "b")
    assert not token_matches("a" * 20, None)
    assert not token_matches("a" * 20, "ä" * 20)


async def test_another_address_needs_an_explicit_flag_and_warns() -> None:
    with pytest.raises(ValueError, match="allow_remote"):
        async with serving(host="0.0.0.0"):
            pass
    with structlog.testing.capture_logs() as logs:
        async with serving(host="0.0.0.0", allow_remote=True) as s:
            assert s.web.url.startswith(f"http://127.0.0.1:{s.web.port}/?token=")
            assert (await s.client.get("/api/questions")).status_code == 200
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert any("reachable from other machines" in entry["summary"] for entry in warnings)


async def test_the_loopback_default_binds_loopback_only() -> None:
    async with serving() as s:
        assert s.web.listener.socket.getsockname()[0] == "127.0.0.1"


async def test_bad_ports_and_a_port_in_use_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="port"):
        async with serving(port=70000):
            pass
    async with serving() as s:
        with pytest.raises(OSError, match="in use"):
            async with serving(port=s.web.port):
                pass


async def test_the_event_stream_refuses_a_wrong_token_even_on_a_raw_connection() -> None:
    async with serving() as s:
        with pytest.raises(AssertionError):
            async with open_events(s.web.port, "wrong-token-0123456789"):
                pass


async def test_no_log_line_carries_the_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving() as s:
        await s.client.get("/api/questions")
        await s.client.get("/", params={"token": s.web.token})
        token = s.web.token
    ours = [r for r in caplog.records if r.name.startswith(("hotseam", "hypercorn"))]
    assert ours
    # The web.serving event exists to give the page's address (see the test below).
    assert all(
        token not in record.getMessage()
        for record in ours
        if "web.serving" not in record.getMessage()
    )


def test_host_policy_names_and_ports() -> None:
    from hotseam.providers._web._security import HostPolicy

    policy = HostPolicy("127.0.0.1", 8765, ("inbox.example",))
    assert policy.host_ok("127.0.0.1:8765") and policy.host_ok("[::1]:8765")
    assert policy.host_ok("inbox.example:8765") and not policy.host_ok("inbox.example:80")
    assert not policy.host_ok("127.0.0.1") and not policy.host_ok(None)
    assert not policy.host_ok("[::1]") and not policy.host_ok("127.0.0.1:8765:1")
    assert policy.origin_ok(None) and policy.origin_ok("http://localhost:8765")
    assert not policy.origin_ok("http://localhost:8765.evil.example")
    remote = HostPolicy("192.0.2.10", 80)
    assert remote.host_ok("192.0.2.10") and remote.host_ok("192.0.2.10:80")
    assert not remote.host_ok("192.0.2.11")


async def test_serving_logs_the_pages_address_with_its_token() -> None:
    """A provider module's inbox has no CLI line: its ``web.serving`` event gives the URL
    (the address alone does not open the page)."""
    with structlog.testing.capture_logs() as logs:
        async with serving() as s:
            assert (await s.client.get("/api/questions")).status_code == 200
            url = s.web.url
    (served,) = [entry for entry in logs if entry["event"] == "web.serving"]
    assert served["url"] == url and url.endswith(f"?token={s.web.token}")
