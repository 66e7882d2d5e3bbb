"""Who is on the other end of a connection: the owner identity of shared-memory regions.

Layer: the server (pure stdlib; imports nothing of nbinfer); never the client, transports,
session, interop or notebook.

A registered shared-memory region belongs to the identity of the connection that registered it,
and only callers with the same identity may name it (see ``shm.py``). For a TCP peer on a
loopback address the identity is the uid owning the *client's* socket, read from
``/proc/net/tcp`` / ``/proc/net/tcp6`` (the row whose local address is the client's and whose
remote address is the server's; the kernel fills its ``uid`` column, a client cannot forge it).
Every other caller (another host, a Unix socket, a failed lookup, a platform without ``/proc``)
is :data:`REMOTE`: remote callers share regions among themselves as before (they all hold the
server's one token when it has one). Calls made on the data plane in-process, without a
transport, are :data:`IN_PROCESS`.

Lookups read the whole table (cost grows with the machine's TCP sockets, see
docs/server.md), so they run only for requests that register or name a region, and a
connection's answer is cached for :data:`MAX_AGE` seconds, keyed by its addresses. The cache
is bounded and short-lived because a port can be reused by another process once a connection
closes.

Example::

    peers = PeerIdentities()
    peers.of_addresses(("127.0.0.1", 50412), ("127.0.0.1", 8000))  # 'uid:1000'
    peers.of_grpc_peer("ipv4:127.0.0.1:50414")  # 'uid:1000'
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable

__all__ = [
    "IN_PROCESS",
    "MAX_AGE",
    "REMOTE",
    "Caller",
    "PeerIdentities",
    "in_process",
    "socket_uid",
]

#: The identity of callers that are not a local TCP peer (or whose uid could not be found).
REMOTE = "remote"
#: The identity of calls made on the data plane directly (tests, in-process embedding).
IN_PROCESS = "process"
#: Seconds a connection's identity stays cached before it is looked up again.
MAX_AGE = 1.0
#: Connections remembered at once.
MAX_ENTRIES = 4096

#: Resolves the caller's identity; called only when a request names a region.
Caller = Callable[[], str]

_TABLES = {socket.AF_INET: "/proc/net/tcp", socket.AF_INET6: "/proc/net/tcp6"}
_ESTABLISHED = "01"


def in_process() -> str:
    """The :data:`Caller` of in-process calls (no transport)."""
    return IN_PROCESS


def _hex_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """``ip:port`` as the kernel prints it in /proc/net/tcp[6] (32-bit words, host order)."""
    raw = ip.packed
    words = "".join(
        f"{int.from_bytes(raw[i : i + 4], sys.byteorder):08X}" for i in range(0, len(raw), 4)
    )
    return f"{words}:{port:04X}"


def _rows(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[tuple[str, str]]:
    """``(table, form)`` pairs where a socket bound to ``ip`` may be listed."""
    if isinstance(ip, ipaddress.IPv4Address):
        mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
        return [(_TABLES[socket.AF_INET], str(ip)), (_TABLES[socket.AF_INET6], str(mapped))]
    if ip.ipv4_mapped is not None:
        return [(_TABLES[socket.AF_INET], str(ip.ipv4_mapped)), (_TABLES[socket.AF_INET6], str(ip))]
    return [(_TABLES[socket.AF_INET6], str(ip))]


def _loopback(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip if ip.ipv4_mapped.is_loopback else None
    return ip if ip.is_loopback else None


def socket_uid(client: tuple[str, int], server: tuple[str, int] | None = None) -> int | None:
    """The uid owning the loopback client socket ``client`` connected to ``server``.

    With ``server`` None (gRPC gives only the peer), any established row from ``client`` to a
    loopback address counts. Rows that disagree on the uid answer None, as does anything
    not found (the socket closed, no ``/proc``). Costs one read of the kernel's table: about
    10 ms on the 2-core test VM whatever the number of sockets (the kernel walks its whole
    hash table), hence the cache in :class:`PeerIdentities`.
    """
    host, port = client
    ip = _loopback(host)
    if ip is None:
        return None
    uids: set[int] = set()
    for table, form in _rows(ip):
        needle = f": {_hex_address(ipaddress.ip_address(form), port)} "
        want_remote = None
        if server is not None:
            server_ip = _loopback(server[0])
            if server_ip is None:
                return None
            family = ipaddress.ip_address(form).version
            if family == 6 and isinstance(server_ip, ipaddress.IPv4Address):
                server_ip = ipaddress.IPv6Address(f"::ffff:{server_ip}")
            elif family == 4 and isinstance(server_ip, ipaddress.IPv6Address):
                if server_ip.ipv4_mapped is None:
                    continue
                server_ip = server_ip.ipv4_mapped
            want_remote = _hex_address(server_ip, server[1])
        try:
            with open(table, encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        start = text.find(needle)
        while start >= 0:
            end = text.find("\n", start)
            fields = text[start + 2 : end if end >= 0 else None].split()
            start = text.find(needle, start + 1)
            # fields: local, remote, state, tx:rx, tr:when, retrnsmt, uid, ...
            if len(fields) < 7 or fields[2] != _ESTABLISHED:
                continue
            remote = fields[1]
            if want_remote is not None and remote != want_remote:
                continue
            if want_remote is None and not _remote_loopback(remote):
                continue
            uids.add(int(fields[6]))
        if uids:  # found in the first table: the other one costs as much again
            break
    return uids.pop() if len(uids) == 1 else None


def _remote_loopback(hex_address: str) -> bool:
    words = hex_address.partition(":")[0]
    raw = b"".join(
        int(words[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(words), 8)
    )
    ip = ipaddress.ip_address(raw)
    return _loopback(str(ip)) is not None


class PeerIdentities:
    """Owner identities of connections, cached briefly (thread-safe).

    Args:
        max_age: Seconds an answer is reused for the same addresses.
        max_entries: Connections remembered at once (the oldest go first).
    """

    def __init__(self, *, max_age: float = MAX_AGE, max_entries: int = MAX_ENTRIES) -> None:
        self._max_age = max_age
        self._max_entries = max_entries
        self._cache: OrderedDict[object, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def of_addresses(self, client: object, server: object) -> str:
        """The identity of an HTTP connection from ASGI's ``scope["client"]`` / ``["server"]``."""
        if not (isinstance(client, tuple | list) and len(client) == 2):
            return REMOTE
        peer = (str(client[0]), int(client[1]))
        here = None
        if isinstance(server, tuple | list) and len(server) == 2:
            here = (str(server[0]), int(server[1]))
        return self._cached((peer, here), peer, here)

    def of_grpc_peer(self, peer: str) -> str:
        """The identity of a gRPC call from ``context.peer()`` (``ipv4:127.0.0.1:PORT``)."""
        scheme, _, rest = urllib.parse.unquote(peer).partition(":")
        host, _, port = rest.rpartition(":")
        if scheme not in ("ipv4", "ipv6") or not port.isdigit():
            return REMOTE
        return self._cached(peer, (host.strip("[]"), int(port)), None)

    def _cached(self, key: object, client: tuple[str, int], server: tuple[str, int] | None) -> str:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[1] < self._max_age:
            return hit[0]
        if _loopback(client[0]) is None:
            return REMOTE
        uid = socket_uid(client, server)
        identity = REMOTE if uid is None else f"uid:{uid}"
        with self._lock:
            self._cache[key] = (identity, now)
            self._cache.move_to_end(key)
            while len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
        return identity
