"""Which host names and addresses are this machine: one answer for ``hivelite serve``'s
warning about its ``--host``, the board's loopback check and ``/mcp``'s allowed hosts.

Standard library only, so the CLI can ask without the ``server`` extra installed.
"""

from __future__ import annotations

import ipaddress

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
"""This machine's names as a ``Host`` header writes them (without a port)."""


def is_loopback(name: str) -> bool:
    """Whether a host name or address (no port, no brackets) is this machine."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def names_loopback(header: str) -> bool:
    """Whether a ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``) names
    this machine."""
    if header.startswith("["):
        name = header[1:header.find("]")] if "]" in header else ""
    else:
        name = header.split(":", 1)[0] if header.count(":") == 1 else header
    return is_loopback(name)


__all__ = ["LOOPBACK", "is_loopback", "names_loopback"]
