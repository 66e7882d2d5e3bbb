"""One HTTP/1.1 message read off a raw socket (tests that speak HTTP by hand)."""

from __future__ import annotations

import socket


def read_message(sock: socket.socket, pending: bytes = b"") -> tuple[bytes, bytes, bytes] | None:
    """``(head, body, rest)`` of the next ``Content-Length`` framed message on ``sock``.

    ``pending``: bytes already read past the previous message; ``rest``: those read past this
    one. ``None`` when the peer closed the connection before a whole head arrived.
    """
    data = pending
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head, body[:length], body[length:]
