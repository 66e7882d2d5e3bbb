"""``tritonclient.utils.shared_memory`` over the standard library's POSIX shared memory.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example::

    import nbinfer.compat.tritonclient.utils.shared_memory as shm

    handle = shm.create_shared_memory_region("input_data", "/input_simple", 128)
    shm.set_shared_memory_region(handle, [input0, input1])
    client.register_system_shared_memory("input_data", "/input_simple", 128)
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from nbinfer.errors import NbinferError
from nbinfer.protocol.tensors import decode_bytes_tensor, encode_bytes_tensor

__all__ = [
    "SharedMemoryException",
    "SharedMemoryRegion",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "mapped_shared_memory_regions",
    "set_shared_memory_region",
]


class SharedMemoryException(NbinferError):
    """A shared-memory region could not be created, written or read."""


class SharedMemoryRegion:
    """A mapped POSIX shared-memory region (the handle the functions below take)."""

    def __init__(
        self, triton_shm_name: str, shm_key: str, memory: shared_memory.SharedMemory
    ) -> None:
        self.triton_shm_name = triton_shm_name
        self.shm_key = shm_key
        self.memory = memory


_MAPPED: dict[str, SharedMemoryRegion] = {}


def create_shared_memory_region(
    triton_shm_name: str, shm_key: str, byte_size: int, create_only: bool = False
) -> SharedMemoryRegion:
    """Create (or, unless ``create_only``, open) the region ``shm_key`` of ``byte_size`` bytes.

    Raises:
        SharedMemoryException: The region exists and ``create_only`` is set, or it cannot be made.
    """
    name = shm_key.lstrip("/")
    try:
        memory = shared_memory.SharedMemory(name=name, create=True, size=byte_size)
    except FileExistsError as exc:
        if create_only:
            raise SharedMemoryException(f"shared memory region {shm_key!r} already exists") from exc
        memory = shared_memory.SharedMemory(name=name)
        if memory.size < byte_size:
            memory.close()
            raise SharedMemoryException(
                f"shared memory region {shm_key!r} holds {memory.size} bytes, not {byte_size}"
            ) from exc
    except OSError as exc:
        raise SharedMemoryException(
            f"cannot create shared memory region {shm_key!r}: {exc}"
        ) from exc
    region = SharedMemoryRegion(triton_shm_name, shm_key, memory)
    _MAPPED[shm_key] = region
    return region


def _payload(value: np.ndarray[Any, Any]) -> bytes | memoryview:
    """The bytes to write for one array.

    A 0-d object array holds bytes already in their wire form (what ``utils.
    serialize_byte_tensor`` returns): written as given, as tritonclient does. Other BYTES arrays
    (object, ``S`` or ``U`` dtype, any shape) are serialized here (4-byte lengths).
    """
    if value.dtype == np.object_ and value.ndim == 0:
        item = value.item()
        if not isinstance(item, bytes | bytearray | memoryview):
            raise SharedMemoryException(
                "a 0-d object array must hold serialized bytes (utils.serialize_byte_tensor), "
                f"not {type(item).__name__}"
            )
        return bytes(item)
    if value.dtype == np.object_ or value.dtype.kind in "SU":
        return encode_bytes_tensor(value)
    return np.ascontiguousarray(value).view(np.uint8).reshape(-1).data


def set_shared_memory_region(
    shm_handle: SharedMemoryRegion, input_values: Sequence[np.ndarray[Any, Any]], offset: int = 0
) -> None:
    """Write the arrays back to back from ``offset``.

    Output of ``utils.serialize_byte_tensor`` (a 0-d object array) is written as given; other
    BYTES arrays are serialized first (4-byte lengths), numeric ones copied as they are.

    Raises:
        SharedMemoryException: Not a list of arrays, or they do not fit.
    """
    if not isinstance(input_values, (list, tuple)):
        raise SharedMemoryException("input_values must be a list of numpy arrays")
    buf = shm_handle.memory.buf
    assert buf is not None
    pos = offset
    for value in input_values:
        data = _payload(np.asarray(value))
        end = pos + len(data)
        if end > len(buf):
            raise SharedMemoryException(
                f"{end} bytes do not fit region {shm_handle.shm_key!r} of {len(buf)} bytes"
            )
        buf[pos:end] = data
        pos = end


def get_contents_as_numpy(
    shm_handle: SharedMemoryRegion, datatype: Any, shape: Sequence[int], offset: int = 0
) -> np.ndarray[Any, Any]:
    """A copy of the tensor at ``offset`` (``datatype`` a numpy type; ``np.object_``: BYTES)."""
    buf = shm_handle.memory.buf
    assert buf is not None
    dtype = np.dtype(datatype)
    shape = [int(d) for d in shape]
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == np.object_:
        data = bytes(buf[offset:])
        items = decode_bytes_tensor(_prefix(data, count), count)
        return items.reshape(shape)
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset).copy().reshape(shape)


def _prefix(data: bytes, count: int) -> bytes:
    """The first ``count`` length-prefixed elements of ``data`` (the rest of a region is slack)."""
    pos = 0
    for _ in range(count):
        pos += 4 + int.from_bytes(data[pos : pos + 4], "little")
    return data[:pos]


def mapped_shared_memory_regions() -> list[str]:
    """The keys of the regions this process has mapped."""
    return list(_MAPPED)


def destroy_shared_memory_region(shm_handle: SharedMemoryRegion) -> None:
    """Unmap and remove the region."""
    _MAPPED.pop(shm_handle.shm_key, None)
    shm_handle.memory.close()
    with contextlib.suppress(FileNotFoundError):
        shm_handle.memory.unlink()
