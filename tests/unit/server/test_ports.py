"""Free loopback ports: drawn together, never the same one twice."""

from __future__ import annotations

from tsbatch.server.ports import free_ports, worker_port_base


def test_free_ports_are_all_different() -> None:
    """Drawn together, never the same port twice (TorchServe fails to bind on a repeat)."""
    for _ in range(20):
        ports = free_ports(5)
        assert len(set(ports)) == 5 and all(1024 <= port < 65536 for port in ports)


def test_a_worker_port_block_starts_on_a_hundred() -> None:
    base = worker_port_base()
    assert 20000 <= base < 60000 and base % 100 == 0
