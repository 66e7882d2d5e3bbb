"""Tensor codecs: BYTES, BF16, raw wire bytes and data normalisation."""

from __future__ import annotations

import ast
import inspect
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol import bytes_codec, tensors
from nbinfer.protocol.dtypes import DATATYPES, bfloat16, numpy_dtype
from nbinfer.protocol.tensors import (
    as_array,
    check_shape,
    decode_bytes_tensor,
    element_count,
    encode_bytes_tensor,
    tensor_from_bytes,
    tensor_to_bytes,
    to_bfloat16,
)


def reference_encode(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(x)) + x for x in items)


def reference_decode(buf: bytes) -> list[bytes] | None:
    """The obvious loop; None when malformed."""
    out, offset = [], 0
    while offset < len(buf):
        if offset + 4 > len(buf):
            return None
        (length,) = struct.unpack_from("<I", buf, offset)
        offset += 4
        if offset + length > len(buf):
            return None
        out.append(buf[offset : offset + length])
        offset += length
    return out


def obj(items: list[object]) -> np.ndarray:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr


# Short elements over a few alphabets: text, zeros (which confuse start detection), any byte.
alphabets = st.sampled_from([b"\x00", b"\x00\x01", b"ab", bytes(range(256))])
short_items = alphabets.flatmap(
    lambda alpha: st.lists(
        st.lists(st.sampled_from(list(alpha)), max_size=12).map(bytes), max_size=40
    )
)
any_items = st.lists(st.binary(max_size=700), max_size=20)


# ------------------------------------------------------------------------------------- BYTES


#: as configured (small data is sliced one by one), and small data forced onto the numpy path
LOOP_LIMITS = (bytes_codec._LOOP_MAX_BYTES, 0)


@contextmanager
def loop_limit(limit: int) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bytes_codec, "_LOOP_MAX_BYTES", limit)
        yield


@settings(max_examples=300, deadline=None)
@given(st.one_of(short_items, any_items))
def test_bytes_round_trip_preserves_every_element(items: list[bytes]) -> None:
    wire = encode_bytes_tensor(obj(items))
    assert wire == reference_encode(items)
    for limit in LOOP_LIMITS:
        with loop_limit(limit):
            for count in (len(items), None):
                decoded = decode_bytes_tensor(wire, count)
                assert decoded.dtype == object
                assert decoded.tolist() == items
                assert all(type(x) is bytes for x in decoded)


@settings(max_examples=300, deadline=None)
@given(st.one_of(short_items, any_items), st.data())
def test_bytes_decode_rejects_exactly_what_the_reference_rejects(items, data) -> None:
    wire = bytearray(encode_bytes_tensor(obj(items)))
    if wire:
        action = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
        if action == "flip":
            wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
        elif action == "truncate":
            del wire[data.draw(st.integers(0, len(wire) - 1)) :]
        else:
            wire += data.draw(st.binary(min_size=1, max_size=8))
    buf = bytes(wire)
    expected = reference_decode(buf)
    for limit in LOOP_LIMITS:
        with loop_limit(limit):
            for count in (len(items), None):
                want = expected
                if want is not None and count is not None and len(want) != count:
                    want = None
                try:
                    got = decode_bytes_tensor(buf, count).tolist()
                except InvalidInputError:
                    got = None
                assert got == want


def test_bytes_keeps_empty_elements_nuls_trailing_zeros_and_non_utf8() -> None:
    items = [b"", b"\x00", b"a\x00\x00", b"\x00\x00\x00\x00", b"\xff\xfe\x80", b"", b"x" * 300]
    for limit in LOOP_LIMITS:
        with loop_limit(limit):
            assert (
                decode_bytes_tensor(encode_bytes_tensor(obj(items)), len(items)).tolist() == items
            )


def test_bytes_encodes_str_as_utf8_and_accepts_bytes_likes() -> None:
    items = ["héllo", b"raw", bytearray(b"ba"), memoryview(b"mv"), np.bytes_(b"np"), ""]
    wire = encode_bytes_tensor(obj(items))
    assert decode_bytes_tensor(wire).tolist() == [
        "héllo".encode(),
        b"raw",
        b"ba",
        b"mv",
        b"np",
        b"",
    ]


def test_bytes_accepts_numpy_string_arrays_and_nested_lists() -> None:
    assert encode_bytes_tensor(np.array(["a", "bc"])) == reference_encode([b"a", b"bc"])
    assert encode_bytes_tensor(np.array([b"a", b"bc"])) == reference_encode([b"a", b"bc"])
    strings = np.array(["x", "yz"], dtype=np.dtypes.StringDType())
    assert encode_bytes_tensor(strings) == reference_encode([b"x", b"yz"])
    assert encode_bytes_tensor([["a", "b"], ["c", "d"]]) == reference_encode(
        [b"a", b"b", b"c", b"d"]
    )


def test_bytes_is_row_major_for_non_contiguous_arrays() -> None:
    arr = obj([b"a", b"b", b"c", b"d"]).reshape(2, 2).T
    assert encode_bytes_tensor(arr) == reference_encode([b"a", b"c", b"b", b"d"])


def test_bytes_rejects_non_string_elements_by_type() -> None:
    with pytest.raises(DataTypeError, match="int"):
        encode_bytes_tensor(obj([b"a", 3]))


def test_bytes_decode_reports_truncation_with_sizes() -> None:
    with pytest.raises(InvalidInputError, match="declares 5 bytes but only 2 remain"):
        decode_bytes_tensor(b"\x05\x00\x00\x00ab", 1, name="text")
    with pytest.raises(InvalidInputError, match=r"tensor 'text'.*truncated length prefix"):
        decode_bytes_tensor(b"\x01\x00\x00\x00a\x00\x00", None, name="text")


def test_bytes_decode_reports_count_mismatch_and_trailing_bytes() -> None:
    wire = reference_encode([b"abcdefgh", b"b"])
    with pytest.raises(InvalidInputError, match="expected 3 elements, found 2"):
        decode_bytes_tensor(wire, 3)
    with pytest.raises(InvalidInputError, match="unexpected bytes after the 1 expected"):
        decode_bytes_tensor(wire, 1)
    with pytest.raises(InvalidInputError, match="expected 0 elements"):
        decode_bytes_tensor(wire, 0)
    assert decode_bytes_tensor(b"", 0).shape == (0,)
    assert decode_bytes_tensor(b"").shape == (0,)


def test_bytes_large_tensors_round_trip_on_every_decoder_path(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    text = [f"label-{i}" * int(rng.integers(0, 3)) for i in range(100_000)]
    items = [s.encode() for s in text]
    wire = encode_bytes_tensor(np.array(text, dtype=object))
    assert wire == reference_encode(items)
    assert decode_bytes_tensor(wire, len(items)).tolist() == items
    # binary payloads full of zeros defeat the fast start detection: the chain path must agree
    zeros = [bytes(int(n)) + b"\x01" for n in rng.integers(0, 9, 20_000)]
    assert decode_bytes_tensor(reference_encode(zeros), len(zeros)).tolist() == zeros
    uniform = [b"%07d" % i for i in range(50_000)]
    assert decode_bytes_tensor(reference_encode(uniform), len(uniform)).tolist() == uniform
    monkeypatch.setattr(bytes_codec, "_CHAIN_MAX_BYTES", 0)  # no chain: binary data is sliced
    assert decode_bytes_tensor(reference_encode(zeros), len(zeros)).tolist() == zeros
    monkeypatch.setattr(bytes_codec, "_SHORT_PATH_MAX_BYTES", 0)  # force the per-element loop
    assert decode_bytes_tensor(wire, len(items)).tolist() == items


def test_bytes_long_elements_take_the_slicing_path() -> None:
    items = [bytes([i]) * 10_000 for i in range(50)]
    assert decode_bytes_tensor(reference_encode(items), 50).tolist() == items
    assert decode_bytes_tensor(reference_encode(items)).tolist() == items


@pytest.mark.parametrize("codec", [bytes_codec, tensors], ids=lambda m: m.__name__)
def test_bytes_decoder_imports_no_object_deserializer(codec: object) -> None:
    # the server never unpickles network input: the codecs must not even have the means to
    source = inspect.getsource(codec)  # type: ignore[arg-type]
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    forbidden = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "copyreg", "dill"}
    forbidden |= {"cloudpickle", "joblib"}
    assert not imported & forbidden
    for word in ("pickle", "marshal", "loads(", "eval(", "exec("):
        assert word not in source.lower()
    assert not {"pickle", "marshal", "_pickle"} & set(vars(codec))


def test_bytes_decode_returns_pickle_looking_payloads_as_plain_bytes() -> None:
    import pickle

    evil = [pickle.dumps(print), b"c__builtin__\neval\n(S'1'\ntR.", b"(lp0\n.", b"\x80\x05N."]
    evil = evil * 100 + [pickle.dumps(print, protocol=p) for p in range(6)]
    for count in (len(evil), None):
        decoded = decode_bytes_tensor(reference_encode(evil), count)
        assert decoded.tolist() == evil
        assert all(type(x) is bytes for x in decoded)


def test_bytes_decode_keeps_trailing_nuls_and_outliers_among_many_short_elements(
    monkeypatch,
) -> None:
    # trailing NULs (which numpy S strings drop) and elements longer than the gather matrix's
    # width are re-sliced; empty elements and embedded NULs go through the matrix as they are
    rng = np.random.default_rng(1)
    items = [bytes(rng.integers(0, 3, int(k), dtype=np.uint8)) for k in rng.integers(0, 16, 20_000)]
    items[123] = b"x" * 5000  # longer than the matrix is wide
    items[-1] = b"tail\x00\x00"
    wire = reference_encode(items)
    for count in (len(items), None):
        assert decode_bytes_tensor(wire, count).tolist() == items
    assert sum(x.endswith(b"\x00") for x in items) > 1000
    monkeypatch.setattr(bytes_codec, "_MASK_TABLE_WIDTH", 0)  # broadcast comparison instead
    assert decode_bytes_tensor(wire, len(items)).tolist() == items
    all_empty = [b""] * 1000 + [b"\x00"]
    assert decode_bytes_tensor(reference_encode(all_empty)).tolist() == all_empty


# -------------------------------------------------------------------------------------- BF16


def reference_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even on the float32 bit pattern, NaN kept quiet (integer arithmetic)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def test_bf16_rounds_to_nearest_even_on_ties() -> None:
    one = np.float32(1.0)
    ulp = np.float32(2.0**-7)  # bf16 spacing at 1.0
    values = np.array([one + ulp / 2, one + 3 * ulp / 2, one + ulp / 2 + 2.0**-20], np.float32)
    got = to_bfloat16(values).astype(np.float32)
    np.testing.assert_array_equal(got, [1.0, 1.0 + 2 * ulp, 1.0 + ulp])


def test_bf16_handles_nan_inf_overflow_signed_zero_and_subnormals() -> None:
    values = np.array([np.nan, -np.nan, np.inf, -np.inf, 3.4e38, -0.0, 1e-40, -1e-45], np.float32)
    got = to_bfloat16(values)
    assert got.dtype == bfloat16
    f = got.astype(np.float32)
    assert np.isnan(f[:2]).all()
    assert f[2] == np.inf and f[3] == -np.inf and f[4] == np.inf  # rounds up past the max
    assert np.signbit(f[5]) and f[5] == 0
    np.testing.assert_array_equal(got.view(np.uint16)[2:], reference_bf16_bits(values)[2:])


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bf16_matches_integer_reference_on_random_bit_patterns(seed: int) -> None:
    bits = np.random.default_rng(seed).integers(0, 2**32, 4096, dtype=np.uint32)
    values = bits.view(np.float32)
    got = to_bfloat16(values).view(np.uint16)
    finite = ~np.isnan(values)
    np.testing.assert_array_equal(got[finite], reference_bf16_bits(values)[finite])
    assert np.isnan(to_bfloat16(values[~finite]).astype(np.float32)).all()


def test_bf16_wire_bytes_are_the_upper_half_of_float32_when_exact() -> None:
    values = np.array([1.0, -2.5, 0.15625, 65280.0], np.float32)  # exactly representable
    wire = bytes(tensor_to_bytes(values, "BF16"))
    assert wire == b"".join(v.tobytes()[2:] for v in values)
    np.testing.assert_array_equal(tensor_from_bytes(wire, "BF16", [4]).astype(np.float32), values)


# ------------------------------------------------------------------------------ raw tensors


def sample(datatype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    size = int(np.prod(shape))
    if datatype == "BYTES":
        return obj(
            [bytes(rng.integers(0, 256, i % 5, dtype=np.uint8)) for i in range(size)]
        ).reshape(shape)
    if datatype == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    dtype = numpy_dtype(datatype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (3,), (2, 3, 4)])
def test_raw_bytes_round_trip_every_datatype_and_shape(
    datatype: str, shape: tuple[int, ...]
) -> None:
    arr = sample(datatype, shape, np.random.default_rng(1))
    wire = tensor_to_bytes(arr, datatype)
    back = tensor_from_bytes(wire, datatype, list(shape), name="t")
    assert back.shape == shape
    if datatype == "BYTES":
        assert back.tolist() == arr.tolist()
    else:
        assert back.dtype == numpy_dtype(datatype)
        np.testing.assert_array_equal(
            back.reshape(-1).view(np.uint8), arr.reshape(-1).view(np.uint8)
        )


def test_tensor_to_bytes_is_zero_copy_for_contiguous_little_endian() -> None:
    arr = np.arange(1000, dtype=np.float32)
    wire = tensor_to_bytes(arr, "FP32")
    assert isinstance(wire, memoryview)
    assert np.shares_memory(np.frombuffer(wire, np.uint8), arr)


def test_tensor_to_bytes_converts_big_endian_and_non_contiguous() -> None:
    arr = np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2]
    wire = bytes(tensor_to_bytes(arr, "INT32"))
    assert wire == np.ascontiguousarray(arr).astype("<i4").tobytes()
    wire = bytes(tensor_to_bytes(np.arange(4, dtype=">f8"), "FP64"))
    assert wire == np.arange(4, dtype="<f8").tobytes()


def test_tensor_to_bytes_writes_bool_as_one_byte() -> None:
    assert bytes(tensor_to_bytes(np.array([True, False, True]), "BOOL")) == b"\x01\x00\x01"


def test_tensor_from_bytes_is_a_read_only_zero_copy_view() -> None:
    body = bytearray(np.arange(6, dtype=np.float32).tobytes())
    view = memoryview(body)
    arr = tensor_from_bytes(view[8:], "FP32", [2, 2], name="x")
    assert np.shares_memory(arr, np.frombuffer(body, np.uint8))
    assert not arr.flags.writeable
    np.testing.assert_array_equal(arr, [[2, 3], [4, 5]])


def test_tensor_from_bytes_names_tensor_and_sizes_on_mismatch() -> None:
    with pytest.raises(
        InvalidInputError, match=r"tensor 'img' \(FP32, shape \[2, 3\]\) needs 24 bytes, got 20"
    ):
        tensor_from_bytes(b"\x00" * 20, "FP32", [2, 3], name="img")


def test_tensor_from_bytes_normalises_bool_bytes_above_one() -> None:
    np.testing.assert_array_equal(
        tensor_from_bytes(b"\x00\x02\x01", "BOOL", [3]), [False, True, True]
    )


def test_shapes_must_be_non_negative_integers() -> None:
    assert element_count([]) == 1
    assert element_count([0, 3]) == 0
    with pytest.raises(InvalidInputError, match="invalid shape"):
        element_count([2, -1], name="x")
    with pytest.raises(
        InvalidInputError, match="tensor 'x' has 5 elements but shape \\[2, 3\\] needs 6"
    ):
        check_shape(5, [2, 3], name="x")


# ---------------------------------------------------------------------------------- as_array


def test_as_array_infers_datatypes() -> None:
    assert as_array([1.0, 2.0])[1] == "FP64"
    assert as_array(np.zeros(2, np.float16))[1] == "FP16"
    assert as_array([True])[1] == "BOOL"
    assert as_array(np.zeros(2, ml_dtypes.bfloat16))[1] == "BF16"
    arr, dt = as_array(["a", "b"])
    assert dt == "BYTES" and arr.tolist() == [b"a", b"b"]
    arr, dt = as_array("hello")
    assert dt == "BYTES" and arr.shape == () and arr[()] == b"hello"
    arr, dt = as_array(np.array([["x"], ["y"]]))
    assert dt == "BYTES" and arr.shape == (2, 1) and arr.dtype == object


def test_as_array_converts_to_a_requested_datatype_without_losing_information() -> None:
    arr, _ = as_array([[1, 2]], "FP32")
    assert arr.dtype == np.float32 and arr.shape == (1, 2)
    arr, _ = as_array(np.array([1, 2], np.int64), "UINT8")
    assert arr.dtype == np.uint8
    arr, _ = as_array(np.array([1.0, 1.0 + 2.0**-8], np.float32), "BF16")
    assert arr.dtype == bfloat16
    with pytest.raises(DataTypeError, match=r"300 is outside UINT8's range \[0, 255\]"):
        as_array(np.array([300]), "UINT8")
    with pytest.raises(DataTypeError, match=r"1\.5 is not a whole number"):
        as_array(np.array([1.5]), "INT32")
    with pytest.raises(DataTypeError, match="as BYTES"):
        as_array(np.array([1, 2]), "BYTES")
    with pytest.raises(DataTypeError, match="unknown datatype"):
        as_array([1], "FP8")


def test_as_array_rejects_ragged_lists() -> None:
    with pytest.raises(InvalidInputError):
        as_array([[1, 2], [3]], "FP32")


def test_bytes_decode_rejects_impossible_counts_without_looping() -> None:
    with pytest.raises(InvalidInputError, match="1000000000 elements need at least"):
        decode_bytes_tensor(reference_encode([b"a", b"b"]), 10**9)
