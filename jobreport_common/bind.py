"""The one ``ADDR:PORT`` parser of every listening command."""

from __future__ import annotations


def parse_bind(value: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``:port`` (``default_host``) -> (host, port).

        127.0.0.1:8000 -> ("127.0.0.1", 8000)
        [::1]:8000     -> ("::1", 8000)
    """
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not ADDR:PORT (e.g. 127.0.0.1:8000, [::1]:8000, :8000)")
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")) or len(host) < 3:
            raise ValueError(f"{value!r}: an IPv6 address goes in brackets, e.g. [::1]:8000")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{value!r}: write an IPv6 address in brackets, e.g. [{host}]:{port}")
    if any(c.isspace() for c in host):
        raise ValueError(f"{value!r} is not ADDR:PORT")
    return host or default_host, int(port)
