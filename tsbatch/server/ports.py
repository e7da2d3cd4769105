"""Free loopback ports for TorchServe instances that run side by side (servers, tests, benches)."""

from __future__ import annotations

import contextlib
import random
import socket


def free_ports(count: int) -> list[int]:
    """``count`` different free loopback ports. The sockets stay bound until all are drawn:
    one closed before the next bind lets the kernel hand the same port out twice."""
    with contextlib.ExitStack() as held:
        sockets = [
            held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)
        ]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def free_port() -> int:
    return free_ports(1)[0]


def worker_port_base() -> int:
    """A free-looking block of 100 ports for one instance's worker sockets."""
    for _ in range(50):
        base = random.randrange(20000, 60000, 100)
        if all(_port_free(base + offset) for offset in range(0, 8)):
            return base
    return random.randrange(20000, 60000, 100)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
