"""``[tool.hotseam]`` in the project's ``pyproject.toml`` (the first one up from the working
directory with the table): the commands' options, paths relative to its folder, each key
also a flag, which wins. A wrong key or value is an error naming the key, the file and the
line (read back from the text: ``tomllib`` keeps no positions), never a silent default."""

from __future__ import annotations

import contextlib
import difflib
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._core import HarnessError

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("console", "json")

KEYS: dict[str, str] = {
    "paths": "the provider modules to load and watch: a list of files or folders",
    "agent": "the agent to run, MODULE[:FUNCTION] or path/to/file.py[:FUNCTION]",
    "answers": "a JSON answers file that serves while no watched provider does",
    "polling": "scan for changes instead of file-system notifications (true or false)",
    "setup-timeout": "seconds one module's setup may take",
    "dispose-timeout": "seconds each async disposer of a generation may take",
    "import-timeout": "seconds one module body may take to execute",
    "stall-warning": "seconds the event loop may be blocked before a warning (0: off)",
    "provider-wait": "seconds a question waits for a provider to appear",
    "deletion-grace": "seconds a deleted module file has to come back before it is unloaded",
    "max-module-size": "the largest module file loaded: bytes, or a size such as '2MiB'",
    "log-level": "one of " + ", ".join(LOG_LEVELS),
    "log-format": "one of " + ", ".join(LOG_FORMATS),
    "name": "a name for the control socket, so 'hotseam status NAME' finds the process",
    "web": "serve the web inbox (true or false), as --web does",
    "web-host": "where the web inbox listens (loopback unless web-allow-remote)",
    "web-port": "the web inbox's TCP port (0 picks a free one)",
    "web-allow-remote": "let web-host be an address other machines reach (true or false)",
    "web-token-file": "a file holding the web inbox's token",
    "journal": "the ask journal: a file path, sqlite:///PATH or postgresql://...",
    "http": "hotseam mcp: serve Streamable HTTP on this port instead of stdio (true: a free "
    "port; false: stdio), as --http does",
    "http-host": "hotseam mcp: the loopback address http listens on",
    "http-max-sessions": "hotseam mcp: http sessions open at once (past it the least recently "
    "used idle one is closed)",
    "http-session-idle-timeout": "hotseam mcp: seconds an idle http session is kept",
    "input-ttl": "hotseam mcp: seconds a 2026-07-28 question waits for the host's retry",
    "max-line-bytes": "hotseam mcp: the longest message line read from stdin: bytes, or a "
    "size such as '16MiB'",
}


class ConfigError(HarnessError):
    """The configuration file is unreadable, or a key or value in it is wrong."""

    default_code = "INVALID_CONFIG"


@dataclass(frozen=True, slots=True)
class Config:
    """The validated ``[tool.hotseam]`` table of ``path``, keys as written (kebab-case)."""

    path: Path
    values: dict[str, Any]

    @property
    def root(self) -> Path:
        return self.path.parent

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def path_of(self, path: str) -> str:
        """A path written in the file: relative to the file's folder."""
        given = Path(path).expanduser()
        return str(given if given.is_absolute() else self.root / given)


def find_config(start: Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` with a ``[tool.hotseam]`` table, from ``start`` up."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if re.search(r"^\s*\[\s*tool\.hotseam\s*[\].]", text, re.MULTILINE):
                return path
    return None


def project_config() -> Config | None:
    """The working directory's ``[tool.hotseam]``, checked (:func:`load_config`); ``None``
    without one."""
    found = find_config()
    return load_config(found) if found is not None else None


def load_config(path: Path) -> Config:
    """Read and check ``[tool.hotseam]`` of ``path``.

    Raises:
        ConfigError: the file cannot be read or parsed, a key is unknown, or a value is of
            the wrong kind; the message names the file, the line and the key.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    table = data.get("tool", {}).get("hotseam", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.hotseam] must be a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{path}:{_line_of(text, key)}" if _line_of(text, key) else str(path)
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(KEYS)
            raise ConfigError(
                f"{where}: unknown key {key!r} in [tool.hotseam]{hint}; known keys: {known}"
            )
        values[key] = _checked(key, value, where)
    return Config(path.resolve(), values)


def _checked(key: str, value: Any, where: str) -> Any:
    def wrong(expected: str) -> ConfigError:
        return ConfigError(
            f"{where}: [tool.hotseam] {key} must be {expected}, got {value!r} ({KEYS[key]})"
        )

    if key == "paths":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise wrong("a non-empty list of paths")
        return value
    if key in ("agent", "answers", "name", "web-host", "web-token-file", "journal", "http-host"):
        if not isinstance(value, str) or not value:
            raise wrong("a non-empty string")
        if key == "name" and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
            raise wrong("letters, digits, '.', '_' and '-' (at most 64)")
        return value
    if key in ("polling", "web", "web-allow-remote"):
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if key in ("log-level", "log-format"):
        choices = LOG_LEVELS if key == "log-level" else LOG_FORMATS
        if not isinstance(value, str) or value.lower() not in choices:
            raise wrong("one of " + ", ".join(map(repr, choices)))
        return value.lower()
    if key in ("max-module-size", "max-line-bytes"):
        size = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                size = parse_size(value)
        if size is None or size <= 0:
            raise wrong("a number of bytes > 0, or a size such as '512KiB' or '2MiB'")
        return size
    if key == "web-port":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise wrong("a port number from 0 to 65535")
        return value
    if key == "http":
        if isinstance(value, bool) or (isinstance(value, int) and 0 <= value <= 65535):
            return value
        raise wrong("a port number from 0 to 65535, or true or false")
    if key == "http-max-sessions":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise wrong("a whole number >= 1")
        return value
    # The time bounds: numbers of seconds.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong("a number of seconds")
    seconds = float(value)
    zero_ok = key in ("stall-warning", "deletion-grace")
    if not (seconds > 0 or (zero_ok and seconds == 0)) or math.isnan(seconds):
        raise wrong("a number of seconds >= 0" if zero_ok else "a number of seconds > 0")
    if key != "provider-wait" and math.isinf(seconds):
        raise wrong("a finite number of seconds")
    return seconds


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:(k|m|g)i?b?|b)?\s*", re.IGNORECASE)
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """``'2MiB'`` → 2097152: bytes, or a number with K, M, G (KB, MB, GB read as KiB...);
    else ``ValueError``."""
    found = _SIZE.fullmatch(text)
    if found is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = found.groups()
    return int(float(number) * _UNITS.get((unit or "").lower(), 1))


def _line_of(text: str, key: str) -> int | None:
    """The line of ``key = ...`` inside ``[tool.hotseam]`` (or ``tool.hotseam.key = ...``)."""
    table: str | None = None
    quoted = re.escape(key)
    assignment = re.compile(rf"""^\s*(?:{quoted}|"{quoted}"|'{quoted}')\s*=""")
    dotted = re.compile(rf"""^\s*tool\.hotseam\.(?:{quoted}|"{quoted}")\s*=""")
    for number, line in enumerate(text.splitlines(), start=1):
        header = re.match(r"^\s*\[\s*([^\[\]]+?)\s*\]", line)
        if header is not None:
            table = header.group(1)
            continue
        if table == "tool.hotseam" and assignment.match(line):
            return number
        if table is None and dotted.match(line):
            return number
    return None


def flag_or_config(args: Any, config: Config | None, attribute: str) -> tuple[Any, str]:
    """A command's option: its flag, else its ``[tool.hotseam]`` key, else ``None``; with
    where it came from, for messages."""
    key = attribute.replace("_", "-")
    flag = getattr(args, attribute, None)
    if flag is not None:
        return flag, f"--{key}"
    if config is not None and config.get(key) is not None:
        return config.get(key), f"{key} in {config.path}"
    return None, f"--{key}"
