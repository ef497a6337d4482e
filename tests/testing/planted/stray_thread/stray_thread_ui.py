"""Planted defect: a thread started in setup and never stopped nor joined."""

import threading

from hotseam import Scope

STOP = threading.Event()


def serve() -> None:
    STOP.wait()


def setup(scope: Scope) -> None:
    threading.Thread(target=serve, name="stray-server", daemon=True).start()  # PLANTED
