"""The docs/reload.md walkthrough, on a real terminal (pty) with the real examples.

``hotseam dev examples/providers --agent examples/agent.py:main``: the agent waits on a
question; editing the provider (and then its helper) re-asks the question under the new UI;
answering it ends the agent; hotseam dev keeps watching, and Ctrl-C exits 0.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pexpect
from tests._timing import scaled

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_editing_the_provider_while_the_agent_waits_re_asks_the_question(
    tmp_path: Path,
) -> None:
    """Banner v1 → edit my_ui.py → banner v2, same question → edit look.py → re-asked
    again → answer → the agent reports it; Ctrl-C exits 0."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    ui = tmp_path / "examples" / "providers" / "my_ui.py"
    look = tmp_path / "examples" / "providers" / "look.py"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hotseam", "dev", "examples/providers", "--agent", "examples/agent.py:main"],
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=scaled(20),
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
        # The UI goes away while the question is open (a git stash, a branch switch): after
        # the 2 s grace it is unloaded and the question waits; put back, it is asked again.
        moved = tmp_path / "my_ui.py"
        ui.rename(moved)
        child.expect(r"unloaded examples/providers/my_ui\.py")
        child.expect(
            "waiting for a provider of 'user-interaction' — save one under examples/providers/"
        )
        moved.rename(ui)
        child.expect(r"loaded examples/providers/my_ui\.py")
        child.expect("Which colour should the dashboard use")
        child.send("2\r")
        child.expect("The dashboard will be Green.")
        # The agent's end does not end hotseam dev on a terminal: Ctrl-C does.
        child.expect("hotseam dev keeps watching; save examples/agent.py or press Enter")
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_a_half_typed_reply_survives_a_reload_of_the_provider(tmp_path: Path) -> None:
    """Type "Turise", move the cursor back after "Tur", save my_ui.py: the question is
    re-asked with "Turise" still in the prompt and the cursor where it was, so typing "quo"
    and Enter answers "Turquoise"."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    ui = tmp_path / "examples" / "providers" / "my_ui.py"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hotseam", "dev", "examples/providers", "--agent", "examples/agent.py:main"],
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=scaled(20),
        dimensions=(50, 140),
    )
    try:
        child.expect("Which colour should the dashboard use")
        child.expect("> ")
        child.send("Turise")
        child.expect("Turise")
        child.send("\x1b[D\x1b[D\x1b[D")  # Left x3: the cursor after "Tur"
        child.send("\x0c")  # Ctrl-L redraws: once it is seen, the keys before it were read
        child.expect("Turise")
        source = ui.read_text(encoding="utf-8")
        ui.write_text(source.replace("first version", "second version"), encoding="utf-8")
        child.expect(r"reloaded examples/providers/my_ui\.py \(generation 2\)")
        child.expect("== my_ui, second version")
        child.expect("Which colour should the dashboard use")
        child.expect("> .*Turise")  # re-asked with the half-typed reply in the prompt
        child.send("quo\r")
        child.expect("The dashboard will be Turquoise.")
        # The agent is done; `hotseam dev` either exits or offers to run it again.
        if child.expect([pexpect.EOF, "run it again"]) == 1:
            child.sendintr()
            child.expect(pexpect.EOF)
    finally:
        child.close()
