"""``[tool.hotseam]`` in pyproject.toml, the shared flags, ``--agent``, ``--version``, help."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pytest

from hotseam.cli import build_parser, main
from hotseam.cli._agent import AgentLoadError, load_agent
from hotseam.cli._config import ConfigError, load_config
from hotseam.cli._options import resolve

from ._support import write

PYPROJECT = """
[project]
name = "demo"

[tool.hotseam]
paths = ["providers"]
agent = "agent.py"
setup-timeout = 3
log-format = "json"
polling = true
"""


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


@pytest.fixture(name="project")
def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(tmp_path / "pyproject.toml", PYPROJECT)
    (tmp_path / "providers").mkdir()
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found by walking up
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


class TestConfiguration:
    def test_the_file_fills_what_no_flag_gives_and_flags_win(self, project: Path) -> None:
        settings = resolve(_args(), log_format="console", provider_wait=60.0)
        assert settings.paths == [str(project / "providers")]
        assert settings.agent == str(project / "agent.py") + ""
        assert settings.setup_timeout == 3.0
        assert settings.dispose_timeout == 5.0  # the default
        assert settings.log_format == "json"
        assert settings.polling is True
        assert settings.config == project / "pyproject.toml"

        flagged = resolve(
            _args("elsewhere", "--setup-timeout", "7", "--log-format", "console"),
            log_format="console",
            provider_wait=60.0,
        )
        assert flagged.paths == ["elsewhere"]
        assert flagged.setup_timeout == 7.0
        assert flagged.log_format == "console"

    def test_an_unknown_key_names_itself_the_file_and_the_line(self, project: Path) -> None:
        write(project / "pyproject.toml", PYPROJECT + "setup-timout = 4\n")
        with pytest.raises(ConfigError) as caught:
            load_config(project / "pyproject.toml")
        message = str(caught.value)
        assert message.startswith(f"{project / 'pyproject.toml'}:10: unknown key 'setup-timout'")
        assert "(did you mean 'setup-timeout'?)" in message

    @pytest.mark.parametrize(
        ("line", "expected"),
        [
            ('log-level = "loud"', "log-level must be one of 'debug', 'info'"),
            ("import-timeout = -1", "import-timeout must be a number of seconds > 0"),
            ('paths = "x"\npaths = 1', "not valid TOML"),
            ("polling = 1", "polling must be true or false"),
        ],
    )
    def test_a_wrong_value_is_an_error_naming_the_key(
        self, project: Path, line: str, expected: str
    ) -> None:
        write(project / "pyproject.toml", "[tool.hotseam]\n" + line + "\n")
        with pytest.raises(ConfigError, match=expected):
            load_config(project / "pyproject.toml")

    def test_bad_configuration_is_one_line_and_exit_2(
        self, project: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(project / "pyproject.toml", PYPROJECT + "colour = 'red'\n")
        assert main(["dev"]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("hotseam dev: ")
        assert "pyproject.toml:10: unknown key 'colour'" in line

    def test_no_path_anywhere_is_exit_2(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.chdir(tmp_path)
        assert main(["dev"]) == 2
        assert "no PATH given, and no 'paths' in a [tool.hotseam]" in capsys.readouterr().err

    @pytest.mark.parametrize("command", ["dev", "run"])
    def test_every_option_is_a_flag(self, command: str) -> None:
        args = build_parser().parse_args(
            [command, "p", "--setup-timeout", "1", "--dispose-timeout", "2", "--import-timeout",
             "3", "--log-level", "DEBUG", "--log-format", "json", "--provider-wait", "4",
             "--name", "x", "--stall-warning", "0", "--polling"]
        )  # fmt: skip
        assert (args.setup_timeout, args.dispose_timeout, args.import_timeout) == (1, 2, 3)
        assert (args.log_level, args.log_format, args.provider_wait) == ("debug", "json", 4)


class TestAgentOption:
    def test_a_module_alone_means_its_main(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        write(tmp_path / "my_agent_mod.py", "async def main(context):\n    return 1\n")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "path", list(sys.path))
        monkeypatch.delitem(sys.modules, "my_agent_mod", raising=False)
        assert load_agent("my_agent_mod").__name__ == "main"
        assert load_agent(str(tmp_path / "my_agent_mod.py")).__name__ == "main"
        monkeypatch.delitem(sys.modules, "my_agent_mod", raising=False)

    def test_a_misspelt_function_gets_did_you_mean(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        write(tmp_path / "typo_agent.py", "async def main(context):\n    return 1\n")
        monkeypatch.setattr(sys, "path", list(sys.path))
        with pytest.raises(
            AgentLoadError, match=r"has no attribute 'mian' \(did you mean 'main'\?\)"
        ):
            load_agent(f"{tmp_path / 'typo_agent.py'}:mian")
        monkeypatch.delitem(sys.modules, "typo_agent", raising=False)


class TestCommandLine:
    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["--version"])
        assert exited.value.code == 0
        assert capsys.readouterr().out.startswith("hotseam 0.")

    @pytest.mark.parametrize("command", ["demo", "dev", "run", "status", "reload"])
    def test_help_has_no_restructuredtext_markup(
        self, command: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "``" not in out
        assert ":func:" not in out
        assert "\\\\n" not in out


def test_acp_takes_the_time_bounds_and_the_log_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same flags on acp, merged with the file in the same way (flags win)."""
    from hotseam.cli._options import resolve

    write(
        tmp_path / "pyproject.toml", "[tool.hotseam]\ndispose-timeout = 9\nlog-level = 'warning'\n"
    )
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(
        ["acp", "--setup-timeout", "1", "--import-timeout", "3", "--log-format", "console"]
    )
    common = resolve(args, log_format="json", provider_wait=math.inf)
    assert (common.setup_timeout, common.dispose_timeout, common.import_timeout) == (1.0, 9.0, 3.0)
    assert (common.reload.setup_timeout, common.reload.import_timeout) == (1.0, 3.0)
    assert (common.log_level, common.log_format) == ("warning", "console")
