"""Loading a bench script (and its neighbours) as a module, for the short versions of the
tortures that run in the unit suite.

``bench/`` is on ``sys.path`` only while they are imported: left there, its scripts
(``web.py``...) would shadow the provider modules tests name the same way.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str, *neighbours: str) -> ModuleType:
    """``bench/NAME.py`` imported (with ``neighbours`` it imports later, lazily)."""
    sys.path.insert(0, str(BENCH))
    try:
        for neighbour in neighbours:
            importlib.import_module(neighbour)
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
