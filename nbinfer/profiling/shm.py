"""System shared memory for the load profiler (perf_analyzer's ``--shared-memory=system``).

Layer: part of ``nbinfer.profiling``; imports ``nbinfer.errors``, ``protocol``, ``client`` and
``capabilities`` (what the server advertises); never the server, the session or the notebook.

Each concurrency slot owns one POSIX input region (its request's tensors, written once) and one
output region (where the server writes the outputs, sized from one request over the wire), both
created with mode 0600 and registered before the warm-up. Every request of the slot names them
in its ``shared_memory_region`` / ``_byte_size`` / ``_offset`` parameters, so no tensor travels.
:meth:`Regions.release` unregisters and unlinks them whatever ended the run (errors, Ctrl-C);
a process killed outright leaves them to ``multiprocessing``'s resource tracker, which unlinks
them at its exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from nbinfer.capabilities import Capabilities
from nbinfer.client import AsyncClient, InferResult
from nbinfer.client.shm import HELD_WAIT_S
from nbinfer.errors import InvalidInputError, NbinferError, UnsupportedError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.tensors import element_count, tensor_from_bytes, tensor_to_bytes
from nbinfer.protocol.types import InferInput, InferRequest, Parameters, RequestedOutput

__all__ = [
    "RATE_SLOTS",
    "SHARED_MEMORY",
    "Regions",
    "Slot",
    "shared_memory_mode",
    "shared_memory_slots",
]

logger = logging.getLogger("nbinfer")

#: perf_analyzer's ``--shared-memory`` values this profiler takes (``cuda`` is refused here).
SHARED_MEMORY = ("none", "system")
#: An open loop has no fixed number of requests in flight: its requests take this many slots'
#: regions in turn (the inputs never change, so requests sharing a slot write the same outputs).
RATE_SLOTS = 8
#: Tensors start at multiples of this in a region (cache lines; numpy views stay aligned).
ALIGN = 64

_REGION = "shared_memory_region"
_BYTE_SIZE = "shared_memory_byte_size"
_OFFSET = "shared_memory_offset"


def shared_memory_mode(value: str | bool | None) -> str:
    """``"none"`` or ``"system"`` from perf_analyzer's names (``True`` / ``False`` too).

    Raises:
        UnsupportedError: ``"cuda"``: CUDA IPC regions need a CUDA device; this runs CPU-only.
        InvalidInputError: Any other value.
    """
    if value is None or value is False:
        return "none"
    if value is True:
        return "system"
    if value == "cuda":
        raise UnsupportedError(
            "shared_memory='cuda' needs a CUDA device and CUDA IPC handles on this host; "
            "nbinfer's profiler runs on the CPU only: use shared_memory='system' (POSIX shared "
            "memory) or 'none'",
            extension="cuda_shared_memory",
        )
    if value not in SHARED_MEMORY:
        raise InvalidInputError(
            f"shared_memory must be 'none' or 'system' (or True / False), not {value!r}"
        )
    return str(value)


def _layout(sizes: Sequence[int]) -> tuple[list[int], int]:
    """Offsets of tensors laid back to back at :data:`ALIGN` boundaries, and the total size."""
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += -(-size // ALIGN) * ALIGN
    return offsets, max(end, ALIGN)


@dataclass
class Slot:
    """One concurrency slot: its request (tensors by region) and where its outputs land."""

    request: InferRequest
    out: shared_memory.SharedMemory
    outputs: dict[str, tuple[int, int]]  # name -> (offset, capacity)

    def read(self, result: InferResult) -> list[np.ndarray[Any, Any]]:
        """The outputs as arrays viewing the output region (as the wire path views its bytes).

        Raises:
            InvalidInputError: An output does not fit its place in the region.
        """
        buf = self.out.buf
        assert buf is not None
        arrays = []
        for out in result.outputs:
            offset, capacity = self.outputs[out.name]
            if out.datatype != "BYTES":
                size = element_count(out.shape) * numpy_dtype(out.datatype).itemsize
            elif _BYTE_SIZE in out.parameters:
                size = int(out.parameters[_BYTE_SIZE])
            else:  # Triton does not say how many bytes it wrote: walk the length prefixes
                size = _bytes_extent(buf[offset : offset + capacity], element_count(out.shape))
            view = buf[offset : offset + size]
            arrays.append(tensor_from_bytes(view, out.datatype, out.shape, name=out.name))
        return arrays


def _bytes_extent(data: memoryview, count: int) -> int:
    """How many bytes ``count`` length-prefixed BYTES elements take at the start of ``data``."""
    end = 0
    for _ in range(count):
        end += 4 + int.from_bytes(data[end : end + 4], "little")
    return min(end, len(data))


class Regions:
    """The run's POSIX regions: created (mode 0600), registered, then always released."""

    def __init__(self, client: AsyncClient, caps: Capabilities) -> None:
        self.client = client
        self.caps = caps
        self.tag = f"nbinfer_profile_{os.getpid()}_{secrets.token_hex(3)}"
        self.memories: list[shared_memory.SharedMemory] = []
        self.registered: list[str] = []
        self.slots: list[Slot] = []

    async def _region(self, name: str, size: int) -> shared_memory.SharedMemory:
        memory = shared_memory.SharedMemory(name=name, create=True, size=size)
        self.memories.append(memory)
        try:
            await self.client.register_system_shared_memory(name, "/" + name, size)
        except NbinferError as exc:
            raise UnsupportedError(
                f"{self.caps.server} at {self.client.url} could not register the shared-memory "
                f"region /{name} this process created ({exc}). System shared memory needs the "
                "server on this host, seeing its /dev/shm (a container: --ipc=host); "
                "profile over the wire with shared_memory='none'",
                server=self.caps.name,
                version=self.caps.version,
                extension="system_shared_memory",
            ) from exc
        self.registered.append(name)
        return memory

    async def add_slot(self, request: InferRequest, probe: InferResult) -> Slot:
        """A slot whose input region holds ``request``'s tensors; outputs sized by ``probe``."""
        index = len(self.slots)
        payloads = []
        for tensor in request.inputs:
            if tensor.data is None:
                raise InvalidInputError(
                    f"input {tensor.name!r} names a region of its own: with "
                    "shared_memory='system' the profiler places the inputs itself; pass data",
                    tensor=tensor.name,
                )
            payloads.append(tensor_to_bytes(tensor.data, tensor.datatype))
        offsets, size = _layout([len(p) for p in payloads])
        name = f"{self.tag}_{index}_in"
        memory = await self._region(name, size)
        buf = memory.buf
        assert buf is not None
        inputs = []
        for tensor, payload, offset in zip(request.inputs, payloads, offsets, strict=True):
            buf[offset : offset + len(payload)] = payload
            params: Parameters = {_REGION: name, _BYTE_SIZE: len(payload), _OFFSET: offset}
            inputs.append(
                InferInput(tensor.name, tensor.datatype, list(tensor.shape), None, params)
            )
        capacities = []
        for out in probe.outputs:
            wire = len(tensor_to_bytes(probe.as_numpy(out.name), out.datatype))
            capacities.append(2 * wire + ALIGN if out.datatype == "BYTES" else wire)
        offsets, size = _layout(capacities)
        name = f"{self.tag}_{index}_out"
        out_memory = await self._region(name, size)
        outputs = [
            RequestedOutput(out.name, parameters={_REGION: name, _BYTE_SIZE: cap, _OFFSET: off})
            for out, cap, off in zip(probe.outputs, capacities, offsets, strict=True)
        ]
        slot_request = InferRequest(
            inputs,
            outputs,
            parameters=dict(request.parameters),
            model_name=request.model_name,
            model_version=request.model_version,
        )
        places = {
            o.name: (off, cap)
            for o, off, cap in zip(probe.outputs, offsets, capacities, strict=True)
        }
        slot = Slot(slot_request, out_memory, places)
        self.slots.append(slot)
        return slot

    async def release(self) -> None:
        """Unregister every region from the server, then unmap and unlink each (never raises).

        A server may still hold a region just after the load's last answer (Triton lets go of
        a request's regions after sending its response, and of cancelled requests when their
        model call ends) and refuses to unregister it meanwhile: such regions are retried
        until :data:`HELD_WAIT_S` has passed. An unreachable server is not waited for.
        """
        try:
            await self._unregister()
        finally:
            for memory in self.memories:
                try:
                    memory.close()
                except BufferError as exc:  # a view still alive: unlinking frees /dev/shm
                    logger.warning("profile: shm region %s still in use: %s", memory.name, exc)
                with contextlib.suppress(FileNotFoundError):
                    memory.unlink()
            self.memories.clear()

    async def _unregister(self) -> None:
        """Unregister :attr:`registered`, each waited for while the server holds it (bounded)."""
        names, self.registered = self.registered, []
        deadline = time.monotonic() + HELD_WAIT_S  # for them all
        for name in names:
            wait = max(0.0, deadline - time.monotonic())
            try:
                await self.client.unregister_system_shared_memory(name, wait=wait)
            except (NbinferError, asyncio.CancelledError) as exc:  # held, unreachable, or cut
                logger.warning("profile: could not unregister shm region %s: %s", name, exc)


async def _probe(client: AsyncClient, model: str, request: InferRequest) -> InferResult:
    """One request over the wire, to size the output regions (a few tries: flaky models)."""
    for attempt in range(3):
        try:
            return await client.infer(model, request)
        except NbinferError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def shared_memory_slots(
    client: AsyncClient, model: str, request: InferRequest, slots: int
) -> Regions:
    """Check the server offers system shared memory, then make and register ``slots`` slots.

    Raises:
        UnsupportedError: The server lacks the extension, or cannot open this host's regions.
    """
    meta = await client.get_server_metadata()
    caps = Capabilities(meta.name, meta.version, tuple(meta.extensions), protocol=client.protocol)
    if not caps.advertises("system_shared_memory"):
        raise caps.unsupported(
            "system_shared_memory",
            "profiling with shared_memory='system'",
            "Profile over the wire: shared_memory='none'.",
        )
    probe = await _probe(client, model, request)
    regions = Regions(client, caps)
    try:
        for _ in range(slots):
            await regions.add_slot(request, probe)
    except BaseException:
        await regions.release()
        raise
    return regions
