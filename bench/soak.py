"""Soak: thousands of reloads in one process, checking memory and speed stay flat.

    .venv/bin/python bench/soak.py [--reloads 5000]

Reloads a provider module and the helper it imports ``--reloads`` times by hand (each
reload: write the file, ``reloader.reload(path)``, one ask answered by the new
generation; every 50th save is a broken one that must be refused, so aborted attempts are
soaked too). Prints a markdown table with:

* RSS after the first 100 reloads (warm-up, after ``gc.collect()``) and at the end, and the
  growth between them (goal ≤ 10 MB);
* the median time of a reload in the first 100 and in the last 100, from the completed
  write to the answer (goal: the last no slower than 1.2x the first).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from hotseam import Context
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import Reloader

QUESTION = AskUserQuestionRequest("Which version is serving?")
WINDOW = 100

HELPER = "PREFIX = 'v{version}'\n"
PROVIDER = """\
import words
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer

VERSION = {version}


class Provider:
    async def ask(self, request):
        return AskUserQuestionAnswer(f"{{words.PREFIX}}/{{VERSION}}")


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
    scope.defer(lambda: None)
"""


def rss_bytes() -> int:
    """The resident set size now (Linux /proc), else the peak from getrusage."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def machine() -> str:
    try:
        uname = subprocess.run(
            ["uname", "-a"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        uname = " ".join(platform.uname())
    return f"`{uname}`, {os.cpu_count()} CPUs (nproc), Python {platform.python_version()}"


async def soak(folder: Path, reloads: int) -> dict[str, float]:
    provider = folder / "soak_ui.py"
    helper = folder / "words.py"
    helper.write_text(HELPER.format(version=0), encoding="utf-8")
    provider.write_text(PROVIDER.format(version=0), encoding="utf-8")
    context = Context("soak")
    durations: list[float] = []
    refused = 0
    rss_warm = 0
    async with Reloader(context, [folder], watch=False) as reloader:
        for version in range(1, reloads + 1):
            if version % 50 == 0:
                provider.write_text("def setup(scope:\n", encoding="utf-8")
                refused += not (await reloader.reload(provider)).ok
            if version % 2:
                helper.write_text(HELPER.format(version=version), encoding="utf-8")
                changed = helper
            else:
                changed = provider
            provider.write_text(PROVIDER.format(version=version), encoding="utf-8")
            # From the completed write: a back-to-back rewrite of one file can stall for
            # milliseconds on ext4, which is the file system's time, not the reload's.
            started = time.perf_counter()
            result = await reloader.reload(folder if changed is helper else provider)
            result.raise_for_errors()
            answer = await ask(QUESTION, context=context)
            durations.append(time.perf_counter() - started)
            prefix = version if version % 2 else version - 1
            assert answer.answer == f"v{prefix}/{version}", answer
            if version == WINDOW:
                gc.collect()
                rss_warm = rss_bytes()
        gc.collect()
        rss_end = rss_bytes()
        generation = reloader.status_of(provider).generation
    return {
        "reloads": reloads,
        "refused": refused,
        "generation": float(generation or 0),
        "rss_warm": rss_warm,
        "rss_end": rss_end,
        "first": statistics.median(durations[:WINDOW]),
        "last": statistics.median(durations[-WINDOW:]),
        "total": sum(durations),
    }


async def main(reloads: int) -> None:
    # The broken saves are refused on purpose; their error logs would only be noise here.
    logging.getLogger("hotseam.reload").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "providers"
        folder.mkdir()
        result = await soak(folder, reloads)
    mb = 1024 * 1024
    growth = (result["rss_end"] - result["rss_warm"]) / mb
    ratio = result["last"] / result["first"]
    print(f"Machine: {machine()}.\n")
    print(
        f"{reloads} reloads ({result['refused']:.0f} broken saves refused on the way; the "
        f"provider reached generation {result['generation']:.0f}) in {result['total']:.1f} s:\n"
    )
    print(
        "| reloads | RSS after 100 | RSS at the end | growth | median reload, first 100 "
        "| median reload, last 100 | last / first |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {reloads} | {result['rss_warm'] / mb:.1f} MB | {result['rss_end'] / mb:.1f} MB | "
        f"{growth:+.1f} MB | {result['first'] * 1000:.2f} ms | {result['last'] * 1000:.2f} ms "
        f"| {ratio:.2f}x |"
    )
    print(
        f"\nGoals: growth ≤ 10 MB ({'met' if growth <= 10 else 'MISSED'}); last / first ≤ 1.2x "
        f"({'met' if ratio <= 1.2 else 'MISSED'})."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reloads", type=int, default=5000)
    options = parser.parse_args()
    if options.reloads < 2 * WINDOW:
        sys.exit(f"--reloads must be at least {2 * WINDOW}")
    anyio.run(main, options.reloads)
