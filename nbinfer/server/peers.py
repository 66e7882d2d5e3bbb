"""Who is on the other end of a connection: the owner identity of shared-memory regions.

Layer: the server (pure stdlib; imports nothing of nbinfer); never the client, transports,
session, interop or notebook.

A registered shared-memory region belongs to the identity of the connection that registered it,
and only callers with the same identity may name it (see ``shm.py``). For a TCP peer on a
loopback address the identity is the uid owning the *client's* socket, which the kernel records
and a client cannot forge. It is asked for the one socket whose local address is the client's
and whose remote address is the server's: through ``NETLINK_SOCK_DIAG`` (an exact lookup,
~10 µs, on one netlink socket opened with the server, so a lookup needs no new descriptor and
still works when the process is out of them) when the server's address is known, else from
``/proc/net/tcp`` / ``/proc/net/tcp6`` (the row's ``uid`` column; reading the table makes the
kernel walk its whole TCP hash table, ~5-20 ms). Every other caller (another host, a Unix
socket, a failed lookup, a platform without ``/proc``) is :data:`REMOTE`: an unknown identity,
never "the same user". ``shm.py`` refuses shared memory to remote callers unless the operator
allowed it (``--allow-remote-shm``); then they share regions among themselves. Calls made on
the data plane in-process, without a transport, are :data:`IN_PROCESS`.

Lookups run only for requests that register or name a region. HTTP knows both addresses: one
exact lookup per such request, nothing cached, so a port reused by another process after a
connection closed is seen as that process's. gRPC gives only the peer: the frontend passes the
address its server is bound to, so each call is one exact lookup too; only a server bound to a
wildcard or a name (its local address per connection unknown) reads it from ``/proc`` once per
peer (cached, bounded). Without netlink, answers from ``/proc`` are cached for :data:`MAX_AGE`
seconds per connection.

Example::

    peers = PeerIdentities()
    peers.of_addresses(("127.0.0.1", 50412), ("127.0.0.1", 8000))  # 'uid:1000'
    peers.of_grpc_peer("ipv4:127.0.0.1:50414", ("127.0.0.1", 8001))  # 'uid:1000'
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys
import threading
import time
import urllib.parse
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

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
#: Seconds a /proc answer stays cached (only where netlink sock_diag is missing).
MAX_AGE = 1.0
#: Connections remembered at once.
MAX_ENTRIES = 4096

#: Resolves the caller's identity; called only when a request names a region.
Caller = Callable[[], str]

_TABLES = {socket.AF_INET: "/proc/net/tcp", socket.AF_INET6: "/proc/net/tcp6"}
_ESTABLISHED = "01"
_ESTABLISHED_STATE = 1
_TCPF_ESTABLISHED = 1 << _ESTABLISHED_STATE
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20


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


def _loopback(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip if ip.ipv4_mapped.is_loopback else None
    return ip if ip.is_loopback else None


def _forms(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a socket bound to ``ip`` may be listed under (IPv4 first)."""
    if isinstance(ip, ipaddress.IPv4Address):
        return [ip, ipaddress.IPv6Address(f"::ffff:{ip}")]
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped, ip]
    return [ip]


def _same_family(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, version: int
) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    return next((f for f in _forms(ip) if f.version == version), None)


_Address = tuple[str, int]


def _proc_rows(client: _Address, server: _Address | None) -> list[tuple[int, _Address]]:
    """``(uid, remote address)`` of the established rows of ``/proc/net/tcp[6]`` from ``client``.

    With ``server`` None, any loopback remote counts. Stops at the first table with a match
    (each read costs the kernel a walk of its whole hash table).
    """
    ip = _loopback(client[0])
    server_ip = _loopback(server[0]) if server is not None else None
    if ip is None or (server is not None and server_ip is None):
        return []
    rows: list[tuple[int, _Address]] = []
    for form in _forms(ip):
        want_remote = None
        if server is not None and server_ip is not None:
            remote_ip = _same_family(server_ip, form.version)
            if remote_ip is None:
                continue
            want_remote = _hex_address(remote_ip, server[1])
        table = _TABLES[socket.AF_INET if form.version == 4 else socket.AF_INET6]
        try:
            with open(table, encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        needle = f": {_hex_address(form, client[1])} "
        start = text.find(needle)
        while start >= 0:
            end = text.find("\n", start)
            fields = text[start + 2 : end if end >= 0 else None].split()
            start = text.find(needle, start + 1)
            # fields: local, remote, state, tx:rx, tr:when, retrnsmt, uid, ...
            if len(fields) < 7 or fields[2] != _ESTABLISHED:
                continue  # TIME_WAIT rows say uid 0: never trust them
            if want_remote is not None and fields[1] != want_remote:
                continue
            remote = _parse_hex_address(fields[1])
            if _loopback(remote[0]) is None:
                continue
            rows.append((int(fields[6]), remote))
        if rows:
            break
    return rows


class _Diag:
    """One netlink sock_diag socket, opened once and reused for every lookup (thread-safe).

    Opened when the server starts, so a lookup needs no new descriptor: at the descriptor limit
    (``ulimit -n`` reached) callers are still told apart, and a failed lookup is an unknown
    identity (refused for shared memory), never another caller's.
    """

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
        self._sock.settimeout(1.0)
        # closed by close(), or with its owner when that is garbage (a DataPlane never closed)
        self._close = weakref.finalize(self, self._sock.close)
        self._lock = threading.Lock()
        self._seq = 0

    def query(self, request: bytes) -> bytes:
        """The kernel's answer to one exact request (stale answers to timed-out ones skipped)."""
        with self._lock:
            self._seq = seq = (self._seq + 1) & 0xFFFFFFFF
            header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, 1, seq, 0)
            self._sock.sendto(header + request, (0, 0))
            while True:
                reply = self._sock.recv(8192)
                if len(reply) >= 16 and struct.unpack_from("=I", reply, 8)[0] == seq:
                    return reply

    def close(self) -> None:
        self._close()


def _diag_uid(client: _Address, server: _Address, diag: _Diag | None = None) -> int | None:
    """The uid of the established socket ``client`` -> ``server`` by an exact netlink lookup.

    Uses ``diag`` (a socket kept open) when given, else a socket of its own.

    Raises:
        OSError: netlink sock_diag is not available here (the caller falls back to /proc).
    """
    ip, server_ip = _loopback(client[0]), _loopback(server[0])
    if ip is None or server_ip is None:
        return None
    for form in _forms(ip):
        remote = _same_family(server_ip, form.version)
        if remote is None:
            continue
        family = socket.AF_INET if form.version == 4 else socket.AF_INET6
        sockid = (
            struct.pack("!HH", client[1], server[1])
            + form.packed.ljust(16, b"\0")
            + remote.packed.ljust(16, b"\0")
            + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface, no cookie
        )
        request = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 0, _TCPF_ESTABLISHED) + sockid
        if diag is not None:
            reply = diag.query(request)
        else:
            header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, 1, 1, 0)
            with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
                nl.sendto(header + request, (0, 0))
                reply = nl.recv(8192)
        if len(reply) < 16 + 72 or struct.unpack_from("=H", reply, 4)[0] != _SOCK_DIAG_BY_FAMILY:
            continue  # an error message: no such socket in this family
        # inet_diag_msg: family, state, timer, retrans, sockid (48 B), expires, rqueue,
        # wqueue, uid, inode
        if reply[16 + 1] != _ESTABLISHED_STATE:
            continue
        return int(struct.unpack_from("=I", reply, 16 + 4 + 48 + 12)[0])
    return None


def socket_uid(client: _Address, server: _Address | None = None) -> int | None:
    """The uid owning the established loopback client socket ``client`` -> ``server``.

    With ``server`` None (gRPC gives only the peer), any established socket from ``client``
    to a loopback address counts, found in ``/proc``; sockets that disagree on the uid answer
    None, as does anything not found (the socket closed, no ``/proc``).
    """
    if server is not None:
        try:
            return _diag_uid(client, server)
        except OSError:
            pass
    uids = {uid for uid, _ in _proc_rows(client, server)}
    return uids.pop() if len(uids) == 1 else None


def _open_diag() -> _Diag | None:
    try:
        return _Diag()
    except (OSError, AttributeError):
        return None


def _parse_hex_address(text: str) -> _Address:
    words, _, port = text.partition(":")
    raw = b"".join(
        int(words[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(words), 8)
    )
    return str(ipaddress.ip_address(raw)), int(port, 16)


class PeerIdentities:
    """Owner identities of connections (thread-safe).

    Args:
        max_age: Seconds a ``/proc`` answer is reused for the same addresses when netlink is
            not available (with netlink every lookup is exact and nothing is reused).
        max_entries: Connections remembered at once (the oldest go first).
    """

    def __init__(self, *, max_age: float = MAX_AGE, max_entries: int = MAX_ENTRIES) -> None:
        self._max_age = max_age
        self._max_entries = max_entries
        #: Kept open for the server's life: lookups need no new descriptor.
        self._diag = _open_diag()
        self._exact = self._diag is not None
        #: gRPC peer -> the server address it is connected to (found once, in /proc).
        self._servers: OrderedDict[str, _Address] = OrderedDict()
        #: (client, server) -> (identity, when): /proc answers, only without netlink.
        self._answers: OrderedDict[tuple[_Address, _Address | None], tuple[str, float]]
        self._answers = OrderedDict()
        self._lock = threading.Lock()

    def of_addresses(self, client: object, server: object) -> str:
        """The identity of an HTTP connection from ASGI's ``scope["client"]`` / ``["server"]``."""
        if not (isinstance(client, tuple | list) and len(client) == 2):
            return REMOTE
        peer = (str(client[0]), int(client[1]))
        here = None
        if isinstance(server, tuple | list) and len(server) == 2:
            here = (str(server[0]), int(server[1]))
        return self._identity(peer, here)

    def grpc_caller(self, peer: Callable[[], str], server: _Address | None = None) -> Caller:
        """The :data:`Caller` of one gRPC call (``context.peer``): looked up once, if ever."""
        identity = ""

        def caller() -> str:
            nonlocal identity
            if not identity:
                identity = self.of_grpc_peer(peer(), server)
            return identity

        return caller

    def of_grpc_peer(self, peer: str, server: _Address | None = None) -> str:
        """The identity of a gRPC call from ``context.peer()`` (``ipv4:127.0.0.1:PORT``).

        Args:
            peer: The client's address as gRPC names it.
            server: The gRPC server's own bound address when the frontend knows it (a loopback
                IP and port): the lookup is then one exact netlink query, with no ``/proc``
                read to find which server address the peer is connected to.
        """
        scheme, _, rest = urllib.parse.unquote(peer).partition(":")
        host, _, port = rest.rpartition(":")
        if scheme not in ("ipv4", "ipv6") or not port.isdigit():
            return REMOTE
        client = (host.strip("[]"), int(port))
        if _loopback(client[0]) is None:
            return REMOTE
        if server is not None:
            return self._identity(client, server)
        with self._lock:
            server = self._servers.get(peer)
        if server is None and self._exact:
            # a read of /proc can miss a row while the kernel's table changes: one retry
            rows = _proc_rows(client, None) or _proc_rows(client, None)
            remotes = {remote for _, remote in rows}
            if len(remotes) != 1:
                return REMOTE
            server = remotes.pop()
            self._remember(self._servers, peer, server)
        return self._identity(client, server)

    def _identity(self, client: _Address, server: _Address | None) -> str:
        if _loopback(client[0]) is None:
            return REMOTE
        if self._diag is not None and server is not None:
            try:
                uid = _diag_uid(client, server, self._diag)
            except OSError:  # pragma: no cover - a netlink failure: unknown, never shared
                return REMOTE
            return REMOTE if uid is None else f"uid:{uid}"
        key = (client, server)
        now = time.monotonic()
        with self._lock:
            hit = self._answers.get(key)
        if hit is not None and now - hit[1] < self._max_age:
            return hit[0]
        uid = socket_uid(client, server)
        identity = REMOTE if uid is None else f"uid:{uid}"
        self._remember(self._answers, key, (identity, now))
        return identity

    def close(self) -> None:
        """Close the netlink socket (lookups then read ``/proc``). Idempotent."""
        diag, self._diag = self._diag, None
        self._exact = False
        if diag is not None:
            diag.close()

    def _remember(self, cache: OrderedDict[Any, Any], key: object, value: object) -> None:
        with self._lock:
            cache[key] = value
            cache.move_to_end(key)
            while len(cache) > self._max_entries:
                cache.popitem(last=False)
