"""The options ``dev``, ``run`` and ``acp`` share, merged with ``[tool.hotseam]``.

Every flag defaults to ``None`` ("not given"), so that :func:`resolve` can tell a flag from
a default: a flag wins over the configuration file, which wins over the built-in default.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._config import LOG_FORMATS, LOG_LEVELS, Config, flag_or_config, parse_size, project_config

if TYPE_CHECKING:
    from .._core import Context
    from ..reload import Reloader

DEFAULTS: dict[str, Any] = {
    "setup_timeout": 30.0,
    "dispose_timeout": 5.0,
    "import_timeout": 10.0,
    "stall_warning": 2.0,
    "deletion_grace": 2.0,
    "max_module_size": 1024 * 1024,  # the Reloader's default
    "polling": False,
    "log_level": "info",
}


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def port(text: str) -> int:
    """An argparse type: a TCP port number, 0 (a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return value


def size(text: str) -> int:
    """An argparse type: a number of bytes > 0, or a size such as ``512KiB`` or ``2MiB``."""
    try:
        value = parse_size(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a number of bytes > 0, or a size such as 512KiB or 2MiB, got {text!r}"
        )
    return value


def seconds_or_zero(text: str) -> float:
    """Like :func:`seconds`, or 0 (which turns the option off)."""
    with contextlib.suppress(ValueError):
        if float(text) == 0:
            return 0.0
    try:
        return seconds(text)
    except argparse.ArgumentTypeError:
        message = f"expected 0 or a number of seconds > 0, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """The reloader's options and the log options (``dev``, ``run`` and ``acp``)."""
    add_reload_options(parser)
    add_log_options(parser)


def add_reload_options(parser: argparse.ArgumentParser) -> None:
    """The reloader's options, one function for every command that runs one (``dev``,
    ``run``, ``acp --watch``), so that they cannot drift apart."""
    parser.add_argument(
        "--setup-timeout",
        type=seconds,
        metavar="SECONDS",
        help="fail a module whose setup(scope) is still running after this long (default 30)",
    )
    parser.add_argument(
        "--dispose-timeout",
        type=seconds,
        metavar="SECONDS",
        help="stop waiting for each async disposer of a generation after this long (default 5)",
    )
    parser.add_argument(
        "--import-timeout",
        type=seconds,
        metavar="SECONDS",
        help="fail a module whose body is still executing after this long (default 10)",
    )
    parser.add_argument(
        "--deletion-grace",
        type=seconds_or_zero,
        metavar="SECONDS",
        help="a module whose file (or folder) is gone keeps serving this long, and is "
        "unloaded only if it is still gone then (git stash, branch switches, editors that "
        "delete then write; default 2, 0 disables)",
    )
    parser.add_argument(
        "--max-module-size",
        type=size,
        metavar="SIZE",
        help="refuse to load a module file larger than this (compiling holds the interpreter "
        "lock, so a huge module would freeze the process): bytes, or 512KiB, 2MiB... "
        "(default 1MiB)",
    )
    parser.add_argument(
        "--polling",
        action="store_true",
        default=None,
        help="scan for changes instead of using file-system notifications "
        "(network mounts, some containers)",
    )


def add_log_options(
    parser: argparse.ArgumentParser, *, default_format: str = "console for dev, json for run"
) -> None:
    """``--log-level`` and ``--log-format`` (every long-running command, ``inbox`` too)."""
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        help="the lowest level logged on stderr (default info)",
    )
    parser.add_argument(
        "--log-format",
        type=str.lower,
        choices=LOG_FORMATS,
        help=f"console lines or one JSON object per line (default: {default_format})",
    )


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``dev`` and ``run`` that ``acp`` has no use for."""
    parser.add_argument(
        "--provider-wait",
        type=seconds,
        metavar="SECONDS",
        help="how long a question waits for a provider to appear before failing with "
        "NO_PROVIDER (default: as long as it takes for dev, 60 for run)",
    )
    parser.add_argument(
        "--name",
        metavar="NAME",
        help="a name for the control socket: 'hotseam status NAME' then finds this process; "
        "also the agent's name in the journal (its unfinished run resumes under it)",
    )
    journal = parser.add_mutually_exclusive_group()
    journal.add_argument(
        "--journal",
        metavar="URL",
        help="record every question in this journal, so that an agent run cut short "
        "resumes: sqlite:///PATH, a file path, or postgresql://... (default: 'journal' of "
        "[tool.hotseam], else the embedded journal in hotseam's state folder)",
    )
    journal.add_argument(
        "--no-journal",
        action="store_true",
        default=None,
        help="keep questions in this process only (a restart asks everything again)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        default=None,
        help="start the agent's run anew: its unfinished run (cut short by a stop or a "
        "crash) is abandoned instead of resumed",
    )


@dataclass(frozen=True, slots=True)
class ReloadOptions:
    """The options :func:`add_reload_options` adds, merged with ``[tool.hotseam]``: all a
    command's reloader is made of (:meth:`reloader`)."""

    setup_timeout: float
    dispose_timeout: float
    import_timeout: float
    deletion_grace: float
    max_module_size: int
    polling: bool

    def reloader(self, context: Context, paths: Sequence[str | os.PathLike[str]]) -> Reloader:
        """The reloader of ``paths`` into ``context`` (``ReloadPathError``: a path that is
        no module or folder)."""
        from ..reload import Reloader, WatchOptions

        return Reloader(
            context,
            paths,
            watch=WatchOptions(polling=self.polling, deletion_grace=self.deletion_grace),
            setup_timeout=self.setup_timeout,
            dispose_timeout=self.dispose_timeout,
            import_timeout=self.import_timeout,
            max_module_size=self.max_module_size,
        )


@dataclass(frozen=True, slots=True)
class Settings:
    """Flags, the configuration file and the defaults, merged (flags win)."""

    paths: list[str]
    agent: str | None
    answers: str | None
    polling: bool
    setup_timeout: float
    dispose_timeout: float
    import_timeout: float
    stall_warning: float
    deletion_grace: float
    max_module_size: int
    provider_wait: float
    log_level: str
    log_format: str
    name: str | None
    config: Path | None
    journal: str | None = None
    """The journal's URL (``None``: the embedded default), when :attr:`journaled`."""
    journaled: bool = True
    """False with ``--no-journal``: questions live in this process only."""
    fresh: bool = False
    """``--fresh``: the agent's unfinished run is abandoned, not resumed."""

    @property
    def reload(self) -> ReloadOptions:
        return ReloadOptions(
            self.setup_timeout,
            self.dispose_timeout,
            self.import_timeout,
            self.deletion_grace,
            self.max_module_size,
            self.polling,
        )


def resolve(args: argparse.Namespace, *, log_format: str, provider_wait: float) -> Settings:
    """Merge ``args`` with ``[tool.hotseam]`` (a wrong file: ``ConfigError``); ``log_format``
    and ``provider_wait`` are the command's own defaults."""
    config = project_config()

    def pick(attribute: str, default: Any = None) -> Any:
        value, _ = flag_or_config(args, config, attribute)
        return DEFAULTS.get(attribute, default) if value is None else value

    paths: list[str] = list(getattr(args, "paths", None) or [])
    if not paths and config is not None and config.get("paths"):
        paths = [config.path_of(path) for path in config.get("paths")]
    agent = getattr(args, "agent", None)
    if agent is None and config is not None and config.get("agent"):
        agent = _agent_from_config(config, config.get("agent"))
    answers = getattr(args, "answers", None)
    if answers is None and config is not None and config.get("answers"):
        answers = config.path_of(config.get("answers"))
    journal = journal_url(getattr(args, "journal", None), config)
    return Settings(
        paths=paths,
        agent=agent,
        answers=answers,
        polling=bool(pick("polling")),
        setup_timeout=pick("setup_timeout"),
        dispose_timeout=pick("dispose_timeout"),
        import_timeout=pick("import_timeout"),
        stall_warning=pick("stall_warning"),
        deletion_grace=pick("deletion_grace"),
        max_module_size=pick("max_module_size"),
        provider_wait=pick("provider_wait", provider_wait),
        log_level=pick("log_level"),
        log_format=pick("log_format", log_format),
        name=pick("name"),
        config=config.path if config is not None else None,
        journal=journal,
        journaled=not getattr(args, "no_journal", None),
        fresh=bool(getattr(args, "fresh", None)),
    )


def journal_url(given: str | None, config: Config | None) -> str | None:
    """``--journal``, else ``journal`` of ``config`` (:func:`journal_from_config`), else
    ``None`` (the embedded default)."""
    if given is None and config is not None and config.get("journal") is not None:
        return journal_from_config(config.root, config.get("journal"))
    return given


def journal_from_config(root: Path, url: str) -> str:
    """A journal written in the file, a relative file path made relative to the file's
    folder (a bad URL: ``JournalError`` ``JOURNAL_INVALID_URL``, naming it)."""
    # Here: building the parser (``hotseam mcp`` before its first answer) needs none of it.
    from ..interaction.journal import parse_journal_url

    location = parse_journal_url(url)
    if location.engine != "sqlite" or Path(location.target).is_absolute():
        return url
    return str(root / location.target)


def _agent_from_config(config: Config, spec: str) -> str:
    """An agent spec from the file: a ``.py`` path is made absolute; for a module name the
    file's folder goes on ``sys.path`` (as the working directory does for a flag)."""
    module, sep, function = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if module.endswith(".py"):
        return config.path_of(module) + sep + function
    import sys

    root = str(config.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    return spec
