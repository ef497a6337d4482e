"""``hotseam mcp`` configured from ``[tool.hotseam]`` (its own keys and flags over them),
and bad input: one line on stderr, exit 2. (A configured project served as a process, its
web inbox the fallback of a host without elicitation: ``test_cli_http.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from hotseam.cli import main


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


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('http = "yes"', "http must be a port number from 0 to 65535, or true or false, got 'yes'"),
        ("http = 70000", "http must be a port number from 0 to 65535, or true or false"),
        ('http-host = ""', "http-host must be a non-empty string"),
        ("input-ttl = 0", "input-ttl must be a number of seconds > 0, got 0"),
        ("input-ttl = inf", "input-ttl must be a finite number of seconds"),
        ('max-line-bytes = "lots"', "max-line-bytes must be a number of bytes > 0"),
        ('http-host = "::1"', "http-host in {file} needs --http"),
        ('http = false\nhttp-host = "::1"', "http-host in {file} needs --http"),
        ("http-max-sessions = 0\nhttp = true", "http-max-sessions must be a whole number >= 1"),
        ('http-max-sessions = "64"\nhttp = true', "http-max-sessions must be a whole number"),
        ("http-session-idle-timeout = 0\nhttp = true", "must be a number of seconds > 0"),
        ("http-max-sessions = 8", "http-max-sessions in {file} needs --http"),
    ],
)
def test_bad_keys_of_hotseam_mcp_are_one_line_naming_key_and_file(
    table: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wrong value of one of hotseam mcp's own keys: exit 2 and one line that names the
    key and the file (with the line, where the value is wrong in itself)."""
    (tmp_path / "tools").mkdir()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[tool.hotseam]\npaths = ["tools"]\n{table}\n')
    monkeypatch.chdir(tmp_path)
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("hotseam mcp: ")
    assert message.format(file=pyproject.resolve()) in err
    if "needs --http" not in message:
        assert f"{pyproject.resolve()}:3: [tool.hotseam] " in err


@pytest.mark.parametrize(
    ("table", "flags", "http", "ttl", "max_line_bytes"),
    [
        ("", [], None, 600.0, None),
        ('http = 8765\nhttp-host = "127.0.0.2"', [], ("127.0.0.2", 8765, 64, 3600.0), 600.0, None),
        ("http = true", [], ("127.0.0.1", 0, 64, 3600.0), 600.0, None),
        ("http = 8765", ["--no-http"], None, 600.0, None),
        ("http = false", ["--http"], ("127.0.0.1", 0, 64, 3600.0), 600.0, None),
        ("http = 8765", ["--http", "9000"], ("127.0.0.1", 9000, 64, 3600.0), 600.0, None),
        (
            "http = true\nhttp-max-sessions = 8\nhttp-session-idle-timeout = 60",
            ["--http-max-sessions", "2"],
            ("127.0.0.1", 0, 2, 60.0),
            600.0,
            None,
        ),
        ('input-ttl = 30\nmax-line-bytes = "1MiB"', [], None, 30.0, 1 << 20),
        ("input-ttl = 30\nmax-line-bytes = 4096", ["--input-ttl", "5"], None, 5.0, 4096),
        ("max-line-bytes = 4096", ["--max-line-bytes", "100"], None, 600.0, 100),
    ],
)
def test_keys_of_hotseam_mcp_and_flags_over_them(
    table: str,
    flags: list[str],
    http: tuple[str, int, int, float] | None,
    ttl: float,
    max_line_bytes: int | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """http, http-host, http-max-sessions, http-session-idle-timeout, input-ttl and
    max-line-bytes in [tool.hotseam] are hotseam mcp's flags of the same names; a flag wins
    (--no-http turns a configured http off)."""
    from hotseam.cli import _mcp, build_parser
    from hotseam.cli._options import resolve

    (tmp_path / "pyproject.toml").write_text(f'[tool.hotseam]\npaths = ["tools"]\n{table}\n')
    monkeypatch.chdir(tmp_path)
    args = build_parser({"mcp"}).parse_args(["mcp", *flags])
    settings = resolve(args, log_format="json", provider_wait=1.0)
    own = _mcp._own_options(args, settings.config)
    assert (own.http, own.input_ttl, own.max_line_bytes) == (http, ttl, max_line_bytes)
