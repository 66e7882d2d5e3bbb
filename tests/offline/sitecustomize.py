"""The "no network" guard of the notebook runs (tests/test_notebooks.py): loopback only.

Owns one audit hook, installed in every Python process that starts with this directory on
``PYTHONPATH`` (the notebook kernel, and what it spawns: the embedded server, ``nbinfer``
commands): ``socket.connect`` / ``sendto`` / ``sendmsg`` to an internet address, and name
look-ups of anything but loopback names, raise :class:`NoNetworkError` at once, an ``OSError``
as a machine with no network gives (``ENETUNREACH``), naming the address and this file.
Loopback (127.0.0.0/8, ::1, ``localhost``) and Unix sockets are allowed: the notebooks talk to
their own local server. Connections made in C below Python (libcurl, grpc core) are not seen
here; the test's network namespace covers those where the machine allows one.

Imports only the standard library, never nbinfer. Python runs the first ``sitecustomize`` on
``sys.path``, so this one then runs the one it shadows (Debian's, for instance).
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import ipaddress
import os
import socket
import sys
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
CONNECTS = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})
LOOKUPS = frozenset(
    {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
)


class NoNetworkError(OSError):
    """A process of the notebook run reached for a non-loopback address."""


def is_loopback(host: Any) -> bool:
    """Whether ``host`` (a name or an address, str or bytes) stays on this machine."""
    if host is None or host in ("", b""):
        return True  # getaddrinfo(None, port): the passive / loopback address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False  # a name that only DNS could answer
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or address.is_unspecified or bool(mapped and mapped.is_loopback)


def _refuse(event: str, target: object) -> None:
    raise NoNetworkError(
        errno.ENETUNREACH,
        f"no network in the notebook tests: {event} to {target!r} refused "
        f"(only loopback and Unix sockets; guard: {__file__})",
    )


def _guard(event: str, args: tuple[Any, ...]) -> None:
    if event in CONNECTS:
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
            return  # Unix, netlink, ...: not the network
        if isinstance(address, tuple) and address and not is_loopback(address[0]):
            _refuse(event, address)
    elif event in LOOKUPS:
        host = args[0][0] if event == "socket.getnameinfo" else args[0]  # (sockaddr, flags)
        if not is_loopback(host):
            _refuse(event, args[0])


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


sys.addaudithook(_guard)
_run_shadowed_sitecustomize()
