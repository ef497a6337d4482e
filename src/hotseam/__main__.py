"""``python -m hotseam`` runs the ``hotseam`` command line."""

from __future__ import annotations

import sys

from hotseam.cli import main

sys.exit(main())
