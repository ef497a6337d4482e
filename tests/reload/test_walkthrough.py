"""The docs/reload.md walkthrough, on a real terminal (pty) with the real examples.

``hotseam dev examples/providers --agent examples/agent.py:main``: the agent waits on a
question; editing the provider (and then its helper) re-asks the question under the new UI;
answering it ends the agent and the command exits 0.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pexpect

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_editing_the_provider_while_the_agent_waits_re_asks_the_question(
    tmp_path: Path,
) -> None:
    """Banner v1 → edit my_ui.py → banner v2, same question → edit look.py → re-asked
    again → answer → the agent reports it; exit 0."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    ui = tmp_path / "examples" / "providers" / "my_ui.py"
    look = tmp_path / "examples" / "providers" / "look.py"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hotseam", "dev", "examples/providers", "--agent", "examples/agent.py:main"],
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=20,
        dimensions=(50, 140),
    )
    try:
        child.expect("== my_ui, first version")
        child.expect("Which colour should the dashboard use")
        source = ui.read_text(encoding="utf-8")
        assert 'BANNER = "my_ui, first version' in source
        ui.write_text(
            source.replace("first version: edit BANNER in examples/providers/my_ui.py and save",
                           "second version"),
            encoding="utf-8",
        )  # fmt: skip
        child.expect(r"reloaded examples/providers/my_ui\.py \(generation 2\)")
        child.expect("== my_ui, second version ==")
        child.expect("Which colour should the dashboard use")
        look.write_text(
            look.read_text(encoding="utf-8").replace('f"== {text} =="', 'f">> {text} <<"'),
            encoding="utf-8",
        )
        child.expect(r"reloaded examples/providers/my_ui\.py \(generation 3\)")
        child.expect(">> my_ui, second version <<")
        child.expect("Which colour should the dashboard use")
        child.send("2\r")
        child.expect("The dashboard will be Green.")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
