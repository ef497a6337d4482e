"""Planted defect: a socket opened in setup and closed at exit, not when the scope closes."""

import atexit
import socket

from hotseam import Scope


def setup(scope: Scope) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # PLANTED
    listener.bind(("127.0.0.1", 0))
    atexit.register(listener.close)  # keeps it open until the process ends
