"""Codec throughput: nbinfer.protocol vs tritonclient, measured in the same run.

    python benchmarks/codec.py [--repeat N] [--legacy-tritonclient DIR]

Cases: BYTES (1e5 short strings) encode / decode, BF16 (4M values) encode / decode, FP32 16 MB
as REST JSON and as REST binary (request encode, response decode). Each figure is the best of N
runs, ours and tritonclient's interleaved so that machine noise hits both alike. "speedup" is
tritonclient time / nbinfer time.

tritonclient >= 2.6x dropped its BF16 helpers (callers convert with ml_dtypes themselves, as we
do). To compare with the old ``serialize_bf16_tensor`` / ``deserialize_bf16_tensor`` (a
per-element loop that truncates), install an old release aside and point at it:

    pip install --no-deps --target /tmp/tc250 tritonclient==2.50.0
    python benchmarks/codec.py --legacy-tritonclient /tmp/tc250
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import tritonclient.http as tritonhttp
import tritonclient.utils as tu

from nbinfer.protocol import rest
from nbinfer.protocol.tensors import (
    decode_bytes_tensor,
    encode_bytes_tensor,
    tensor_from_bytes,
    tensor_to_bytes,
    to_bfloat16,
)
from nbinfer.protocol.types import InferInput, InferOutput, InferRequest, InferResponse


def best_of(repeat: int, *fns: Callable[[], Any], number: int = 1) -> list[float]:
    """Best wall time per call of each function over ``repeat`` interleaved rounds.

    ``number`` calls are timed together (for calls far below a millisecond).
    """
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            gc.collect()
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (time.perf_counter() - start) / number)
    return best


def bytes_cases(repeat: int) -> list[tuple[str, float, float]]:
    n = 100_000
    rng = np.random.default_rng(0)
    labels = [f"label-{i}".encode() for i in rng.integers(0, 10**6, n)]  # 7-12 bytes
    arr = np.empty(n, dtype=object)
    arr[:] = labels
    text = np.empty(n, dtype=object)
    text[:] = [b.decode() for b in labels]
    mixed = np.empty(n, dtype=object)  # a third empty, some binary with NULs
    mixed[:] = [b"" if i % 3 == 0 else b"\x00\x01" * (i % 5) + b for i, b in enumerate(labels)]
    rows = []
    for name, data in (("bytes", arr), ("str", text), ("empty+NUL", mixed)):
        wire = encode_bytes_tensor(data)
        assert wire == tu.serialize_byte_tensor(data).item()
        ours, theirs = best_of(
            repeat,
            lambda d=data: encode_bytes_tensor(d),
            lambda d=data: tu.serialize_byte_tensor(d),
        )
        rows.append((f"BYTES encode 1e5 short ({name})", ours, theirs))
        if name == "str":
            continue
        assert decode_bytes_tensor(wire, n).tolist() == tu.deserialize_bytes_tensor(wire).tolist()
        ours, theirs = best_of(
            repeat,
            lambda w=wire: decode_bytes_tensor(w, n),
            lambda w=wire: tu.deserialize_bytes_tensor(w),
        )
        rows.append((f"BYTES decode 1e5 short ({name})", ours, theirs))
    return rows


def load_legacy_utils(root: str) -> Any:
    """Import ``tritonclient.utils`` of an old release installed under ``root`` (side by side)."""
    pkg = Path(root) / "tritonclient" / "utils"
    spec = importlib.util.spec_from_file_location(
        "_legacy_tritonclient_utils", pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def bf16_cases(repeat: int, legacy: Any) -> list[tuple[str, float, float]]:
    values = np.random.default_rng(0).standard_normal(4_000_000).astype(np.float32)
    inp = tritonhttp.InferInput("b", [values.size], "BF16")

    def ours_encode() -> Any:
        return bytes(tensor_to_bytes(to_bfloat16(values), "BF16"))

    def theirs_encode() -> Any:
        # tritonclient 2.6x+: the caller converts with ml_dtypes, InferInput copies the bytes
        return inp.set_data_from_numpy(values.astype(ml_dtypes.bfloat16))._get_binary_data()

    ours, theirs = best_of(repeat, ours_encode, theirs_encode)
    rows = [("BF16 encode 4M from float32 (vs ml_dtypes)", ours, theirs)]
    wire = ours_encode()

    def ours_decode() -> Any:
        return tensor_from_bytes(wire, "BF16", [values.size])

    def theirs_decode() -> Any:
        return np.frombuffer(wire, dtype=ml_dtypes.bfloat16)  # what InferResult.as_numpy does

    ours, theirs = best_of(repeat, ours_decode, theirs_decode, number=1000)
    rows.append(("BF16 decode 4M (vs np.frombuffer)", ours, theirs))
    if legacy is not None:  # per-element loops: seconds per call, one run is enough
        ours, theirs = best_of(1, ours_encode, lambda: legacy.serialize_bf16_tensor(values))
        rows.append(("BF16 encode 4M (vs legacy serialize_bf16_tensor)", ours, theirs))
        old_wire = legacy.serialize_bf16_tensor(values).item()
        ours, theirs = best_of(1, ours_decode, lambda: legacy.deserialize_bf16_tensor(old_wire))
        rows.append(("BF16 decode 4M (vs legacy deserialize_bf16_tensor)", ours, theirs))
    return rows


def fp32_cases(repeat: int) -> list[tuple[str, float, float]]:
    values = np.random.default_rng(0).standard_normal((1024, 4096)).astype(np.float32)  # 16 MB
    rows = []
    for binary in (False, True):
        kind = "binary" if binary else "JSON"
        req = InferRequest(inputs=[InferInput("x", "FP32", list(values.shape), values)])

        def theirs_encode(b: bool = binary) -> Any:
            inp = tritonhttp.InferInput("x", list(values.shape), "FP32")
            inp.set_data_from_numpy(values, binary_data=b)
            return tritonhttp.InferenceServerClient.generate_request_body([inp])

        ours, theirs = best_of(
            repeat, lambda b=binary, r=req: rest.encode_request(r, binary=b), theirs_encode
        )
        rows.append((f"FP32 16 MB request encode ({kind})", ours, theirs))
        resp = InferResponse("m", [InferOutput("y", "FP32", list(values.shape), values)], "1")
        body, header_length = rest.encode_response(resp, binary_outputs=binary)

        def theirs_decode(body: bytes = body, hl: int | None = header_length) -> Any:
            result = tritonhttp.InferenceServerClient.parse_response_body(body, header_length=hl)
            return result.as_numpy("y")

        ours, theirs = best_of(
            repeat,
            lambda body=body, hl=header_length: rest.decode_response(body, hl).outputs[0].data,
            theirs_decode,
            number=10 if binary else 1,
        )
        rows.append((f"FP32 16 MB response decode ({kind})", ours, theirs))
    ours_json, ours_bin = best_of(
        repeat,
        lambda: rest.encode_response(resp, binary_outputs=False),
        lambda: rest.encode_response(resp, binary_outputs=True),
    )
    rows.append(("FP32 16 MB response encode, ours binary vs ours JSON*", ours_bin, ours_json))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--legacy-tritonclient",
        metavar="DIR",
        help="directory with an old tritonclient (e.g. 2.50) for the BF16 helpers it had",
    )
    args = parser.parse_args()
    legacy = load_legacy_utils(args.legacy_tritonclient) if args.legacy_tritonclient else None
    rows = bytes_cases(3 * args.repeat) + bf16_cases(args.repeat, legacy)  # BYTES: cheap, noisy
    rows += fp32_cases(max(3, args.repeat // 2))
    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  {'nbinfer ms':>10}  {'tritonclient ms':>15}  {'speedup':>7}")
    for name, ours, theirs in rows:
        print(
            f"{name:<{width}}  {ours * 1e3:>10.3f}  {theirs * 1e3:>15.3f}  {theirs / ours:>6.1f}x"
        )
    version = getattr(tritonhttp, "__version__", "") or _dist_version("tritonclient")
    print(f"(tritonclient {version}; best of {args.repeat} runs, ours and theirs interleaved)")
    print("* that row's 'tritonclient' column is our own JSON encoding (tritonclient has none)")


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
