"""The public surface of hotseam.providers.acp, and what it needs from the SDK."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, cast

import anyio
import pytest
from tests._timing import scaled

import hotseam.providers.acp as acp_provider
from hotseam import Context
from hotseam.interaction import UserInteractionProvider
from hotseam.providers._acp._wire import AcpWire
from hotseam.providers.acp import AcpProvider


def test_all_is_sorted_and_public() -> None:
    """Sorted __all__; classes show the public module in reprs and tracebacks."""
    assert list(acp_provider.__all__) == sorted(acp_provider.__all__)
    for name in acp_provider.__all__:
        assert hasattr(acp_provider, name), name
    for cls in (acp_provider.AcpProvider, acp_provider.AcpAgent, acp_provider.PromptTurn):
        assert cls.__module__ == "hotseam.providers.acp"


def test_the_provider_is_a_user_interaction_provider() -> None:
    """It satisfies the seam's protocol."""
    provider = AcpProvider()
    assert isinstance(provider, UserInteractionProvider)
    assert repr(provider) == "<AcpProvider 'acp' form=False pending=0>"
    assert provider.pending() == 0


def test_another_sdk_version_is_said_clearly() -> None:
    """The wire hooks into SDK internals; without them it says which and what to install."""

    class NotAConnection:
        pass

    with pytest.raises(RuntimeError, match=r"agent-client-protocol>=0\.12\.1,<0\.13"):
        AcpWire(cast("Any", NotAConnection()))


def test_serving_needs_asyncio() -> None:
    """On trio, serve() says why it cannot run instead of failing deep in the SDK."""

    async def agent(context: Context) -> None:
        raise AssertionError("never called")

    with pytest.raises(RuntimeError, match="needs the asyncio backend"):
        anyio.run(acp_provider.serve, agent, Context("trio"), backend="trio")


def test_building_the_cli_parser_does_not_import_the_sdk() -> None:
    """`hotseam` builds every subcommand's parser: `acp` must not import the SDK (~0.3 s) then."""
    code = (
        "import argparse, sys\n"
        "from hotseam.cli import _acp\n"
        "_acp.add_arguments(argparse.ArgumentParser())\n"
        "assert 'acp' not in sys.modules, 'acp imported'\n"
        "assert 'hotseam.providers.acp' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=scaled(30))
