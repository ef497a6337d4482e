"""`hotseam reload [PATH...]`: reload modules of a running ``hotseam dev`` or ``hotseam run``.

It asks the process over its control socket (see ``hotseam status``) to reload the given
files or folders, or every module when none is given, even those whose content did not
change (``SIGHUP`` to ``hotseam run`` does the same for every module). It prints one line
per module committed, failed or unloaded.

The process is the only one running, or the one ``--to`` names. ``hotseam reload NAME``,
where NAME is no file or folder here but the name (or pid) of a running process, is read
as ``--to NAME`` (with a note saying so): what ``hotseam status NAME`` accepts.

Exit codes: 0 when every module loaded, 1 when one failed or no process could be reached,
2 for bad input (a path the process does not watch).
"""

from __future__ import annotations

import argparse
import os
import sys

from ._control_client import ControlError, find_endpoints, locate, request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders to reload (default: all)"
    )
    parser.add_argument(
        "--to",
        metavar="PID|NAME",
        help="the process to steer: its pid, its --name, or its socket path (default: the "
        "only one running)",
    )


def run(args: argparse.Namespace) -> int:
    given, target = list(args.paths), args.to
    if target is None and len(given) == 1 and _names_a_process(given[0]):
        print(
            f"hotseam reload: {given[0]!r} is no file or folder here but a running process: "
            f"reloading all of it (hotseam reload --to {given[0]})",
            file=sys.stderr,
        )
        given, target = [], given[0]
    # Absolute, links kept: the process resolves them, and names a link it refuses.
    paths = [os.path.abspath(path) for path in given]
    try:
        endpoint, notes = locate(target, choose="with --to PID|NAME")
        for note in notes:
            print(f"hotseam reload: {note}", file=sys.stderr)
        reply = request(endpoint, {"op": "reload", "paths": paths}, timeout=120.0)
    except ControlError as error:
        print(f"hotseam reload: {error}", file=sys.stderr)
        return 1
    if not isinstance(reply, dict):
        print(f"hotseam reload: unexpected reply {reply!r}", file=sys.stderr)
        return 1
    if "committed" not in reply:
        print(f"hotseam reload: {reply.get('error')}", file=sys.stderr)
        return 2 if reply.get("code") == "INVALID_RELOAD_PATH" else 1
    for item in reply["committed"]:
        print(f"reloaded {item['path']} (generation {item['generation']})")
    for path in reply["unloaded"]:
        print(f"unloaded {path}")
    for item in reply["failed"]:
        print(f"failed to load {item['path']}: {item['error']}")
    if not (reply["committed"] or reply["unloaded"] or reply["failed"]):
        print("nothing to reload")
    return 0 if reply.get("ok") else 1


def _names_a_process(text: str) -> bool:
    """Whether ``text`` is no path here but the name or pid of a running process."""
    if os.path.lexists(text) or "/" in text:
        return False
    endpoints, notes = find_endpoints()
    for note in notes:
        print(f"hotseam reload: {note}", file=sys.stderr)
    return any(text in (endpoint.name, str(endpoint.pid)) for endpoint in endpoints)
