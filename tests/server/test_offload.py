"""The in-flight byte budget and the step-wise inflater (nbinfer/server/offload.py)."""

from __future__ import annotations

import threading
import zlib

import pytest

from nbinfer.errors import InvalidInputError, PayloadTooLargeError, QueueFullError
from nbinfer.protocol.grpc import pb
from nbinfer.protocol.grpc_tensors import count_field
from nbinfer.server.offload import InflightBytes, inflate

MiB = 1 << 20


def _pack(data: bytes, wbits: int) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return c.compress(data) + c.flush()


def test_budget_refuses_past_the_limit_naming_it_and_takes_nothing() -> None:
    budget = InflightBytes(100)
    a, b = budget.reservation(), budget.reservation()
    a.take(60)
    with pytest.raises(QueueFullError, match=r"limit of 100 bytes \(--max-inflight-bytes\)"):
        b.take(41)
    assert budget.used == 60 and b.held == 0
    b.take(40)
    a.release()
    a.release()  # idempotent
    assert budget.used == 40
    b.give(100)  # never more than held
    assert budget.used == 0 and b.held == 0


def test_unbounded_budget_never_refuses() -> None:
    budget = InflightBytes(0)
    budget.reservation().take(1 << 40)


def test_budget_is_exact_under_threads() -> None:
    budget = InflightBytes(1 << 30)

    def work() -> None:
        for _ in range(2000):
            r = budget.reservation()
            r.take(7)
            r.release()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.used == 0


@pytest.mark.parametrize(
    ("wbits", "encoding"), [(31, b"gzip"), (15, b"deflate"), (-15, b"deflate")]
)
def test_inflate_gzip_zlib_and_raw_deflate(wbits: int, encoding: bytes) -> None:
    data = bytes(range(256)) * 20_000  # 5 MB: several steps
    budget = InflightBytes(64 * MiB)
    r = budget.reservation()
    assert inflate(_pack(data, wbits), encoding, 8 * MiB, r) == data
    assert r.held == len(data)


def test_bomb_stops_at_the_limit_and_gives_its_bytes_back() -> None:
    bomb = _pack(bytes(64 * MiB), 31)
    budget = InflightBytes(1 << 30)
    r = budget.reservation()
    with pytest.raises(PayloadTooLargeError, match=r"4194304 bytes \(--max-request-bytes\)"):
        inflate(bomb, b"gzip", 4 * MiB, r)
    assert r.held == 0 and budget.used == 0


def test_inflated_bytes_count_against_the_budget() -> None:
    budget = InflightBytes(2 * MiB)
    r = budget.reservation()
    with pytest.raises(QueueFullError, match="--max-inflight-bytes"):
        inflate(_pack(bytes(8 * MiB), 31), b"gzip", 16 * MiB, r)
    assert budget.used == 0


def test_inflate_refuses_unknown_encodings_and_garbage() -> None:
    assert inflate(b"abc", b"identity", 10) == b"abc"
    with pytest.raises(InvalidInputError, match="'br'"):
        inflate(b"abc", b"br", 10)
    with pytest.raises(InvalidInputError, match="not valid gzip"):
        inflate(b"not gzip at all", b"gzip", 10)


def test_count_field_stops_early() -> None:
    msg = pb.ModelInferRequest(model_name="m")
    for i in range(5000):
        msg.parameters[f"p{i}"].bool_param = True
    data = msg.SerializeToString()
    assert count_field(data, 4, 10_000) == 5000
    assert count_field(data, 4, 1001) == 1001
    assert count_field(b"\xff", 4, 10) == 0  # malformed: left to the parser
