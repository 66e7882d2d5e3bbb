"""The zero-copy local path: a pool of POSIX shared-memory regions a client leases per request.

When a client talks to a server on the same machine that offers ``system_shared_memory`` (the
v2 / Triton extension; nbinfer's embedded server always does), big tensors travel through
shared memory both ways: inputs are copied once into a leased region, requested outputs carry
the v2 ``shared_memory_region`` parameters so the server writes them there, and the result hands
them back as read-only NumPy views on the region. Only the standard extension is used, so the
same code works against a Triton on the same host.

Lifetime: a region is leased to one request. Input regions return to the pool when the reply
arrives (the server has read them); an output region stays leased to its :class:`InferResult`
and to every array taken from it, and returns to the pool only when all of them are garbage
(or at :meth:`InferResult.release` once no array taken from it is alive): an array a user keeps
never changes under them.

Regions: against a local server started by this process (a :class:`LocalServer` advertises a
private Unix socket, see ``nbinfer/server/fdpass.py``) each region is a memfd sealed against
resizing, handed to the server over that socket (``SCM_RIGHTS``): the server maps it, reads the
inputs in place and writes the outputs straight into it, and it goes away when this pool closes
its socket or the process dies. Elsewhere (another server, no Linux) each region is a POSIX shm
object registered over HTTP / gRPC, which the server copies in and out of.

Crash safety: every POSIX region is unlinked from ``/dev/shm`` right after the server has opened it,
so a killed process leaves no name behind (the memory lives on only while someone maps or holds
it); a region whose registration was interrupted by a kill is swept by the next pool of the same
user. While a name exists it is mode 0600 (only this user, and a server running as this user,
can open it); once unlinked no other process can open it at all.

Imports the client's results, errors, protocol and transports only: never an engine (the
transport calls go through the binding it is given), the server, the session or IPython.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import functools
import importlib
import json
import logging
import mmap
import os
import secrets
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import numpy as np

from nbinfer.client.results import InferResult, _Decoded
from nbinfer.config import local_server_shm_socket
from nbinfer.errors import (
    InvalidInputError,
    LimitExceededError,
    NbinferError,
    RemoteInvalidInputError,
    ServerError,
    UnsupportedError,
)
from nbinfer.protocol.dtypes import datatype_of, numpy_dtype
from nbinfer.protocol.tensors import tensor_from_bytes
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    Parameters,
    RequestedOutput,
)
from nbinfer.transports import CallOptions, Headers, Op, Pause

if TYPE_CHECKING:
    from typing import TypeAlias

    from nbinfer.protocol.grpc_binding import GrpcBinding
    from nbinfer.protocol.http_binding import HttpBinding

    Binding: TypeAlias = HttpBinding | GrpcBinding

__all__ = [
    "HELD_WAIT_S",
    "SHM_THRESHOLD",
    "SharedMemoryMode",
    "SharedMemoryPool",
    "is_loopback",
    "unregister_when_free",
]

logger = logging.getLogger("nbinfer")

#: What ``shared_memory=`` takes.
SharedMemoryMode = Literal["auto"] | bool
#: Tensors of at least this many bytes go through shared memory in ``"auto"`` mode.
SHM_THRESHOLD = 1 << 20
#: Smallest region (smaller tensors share nothing: each lease is one region).
_MIN_REGION = 1 << 16
#: Bytes a pool may map in all; a tensor that would exceed it travels over the network.
_MAX_POOL = 2 << 30
#: Input signatures whose output sizes a pool remembers.
_MAX_SIGNATURES = 256
_PREFIX = "nbinfer_shm_"
_DEV_SHM = "/dev/shm"
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "ip6-localhost"})

_REGION = "shared_memory_region"
_BYTE_SIZE = "shared_memory_byte_size"
#: Shared, and its page tables filled at once (the pages are reserved already): no call
#: afterwards takes a page fault on the region.
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
#: Seconds one request on the server's memfd socket may take.
_SOCKET_TIMEOUT = 10.0
#: How long closing retries a region the server refuses to unregister because a request still
#: holds it (Triton: "currently in use", for a moment after it answered, or while a request
#: cut off by the client still runs its model).
HELD_WAIT_S = 5.0


def memfd_supported() -> bool:
    """Whether regions can be sealed memfds passed over a Unix socket (Linux)."""
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "memfd_create")
        and hasattr(fcntl, "F_ADD_SEALS")
        and hasattr(socket, "SOCK_SEQPACKET")
    )


class _FdPassError(Exception):
    """The server's memfd socket refused a region (``status`` as an HTTP status)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _FdChannel:
    """This pool's connection to a local server's memfd socket (``server/fdpass.py``).

    The server keeps the regions registered here while the connection is open.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def request(self, body: dict[str, Any], fd: int | None = None) -> dict[str, Any]:
        """Send one request (with ``fd`` attached) and return the server's reply.

        Raises:
            OSError: the socket cannot be reached or answered nothing.
            _FdPassError: the server refused the request.
        """
        payload = json.dumps(body).encode()
        with self._lock:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
                sock.settimeout(_SOCKET_TIMEOUT)
                try:
                    sock.connect(self.path)
                except OSError:
                    sock.close()
                    raise
                self._sock = sock
            try:
                socket.send_fds(self._sock, [payload], [] if fd is None else [fd])
                raw = self._sock.recv(65536)
            except OSError:
                self._close()
                raise
        if not raw:
            self.close()
            raise ConnectionResetError("the server closed its shared memory socket")
        reply: dict[str, Any] = json.loads(raw)
        if "error" in reply:
            raise _FdPassError(str(reply["error"]), int(reply.get("status", 400)))
        return reply

    def unregister(self, name: str) -> None:
        """Unregister region ``name`` (quietly: closing the connection drops it anyway)."""
        if self._sock is None:
            return
        try:
            self.request({"op": "unregister", "name": name})
        except (OSError, ValueError, _FdPassError) as exc:
            logger.debug("could not unregister shared memory region %s: %s", name, exc)
            self.close()

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        """Close the connection: the server drops every region registered over it."""
        with self._lock:
            self._close()


def _sealed_memfd(name: str, capacity: int) -> int:
    """A memfd of ``capacity`` bytes (pages reserved) that nobody can resize any more."""
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, capacity)
        os.posix_fallocate(fd, 0, capacity)
        fcntl.fcntl(
            fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        )
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine by a loopback address."""
    host = urlsplit(url).hostname or ""
    return host.lower() in _LOOPBACK or host.startswith("127.")


def _posixshmem() -> Any:
    return importlib.import_module("_posixshmem")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans() -> list[str]:
    """Unlink this user's pool objects left in ``/dev/shm`` by processes that are gone.

    Only a process killed between creating a region and the server opening it leaves one.
    """
    swept: list[str] = []
    try:
        names = os.listdir(_DEV_SHM)
    except OSError:
        return swept
    uid = os.getuid()
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        pid_text = name[len(_PREFIX) :].partition("_")[0]
        try:
            if os.stat(os.path.join(_DEV_SHM, name)).st_uid != uid:
                continue
            if not pid_text.isdigit() or _pid_alive(int(pid_text)):
                continue
            _posixshmem().shm_unlink("/" + name)
        except OSError:
            continue
        swept.append(name)
    return swept


class _Region:
    """One registered region: a mapping of an (unlinked) shm object, reused across leases."""

    __slots__ = ("capacity", "memfd", "mm", "name")

    def __init__(self, name: str, mm: mmap.mmap, capacity: int, *, memfd: bool = False) -> None:
        self.name = name
        self.mm = mm
        self.capacity = capacity
        #: A sealed memfd registered over the server's socket (not over HTTP / gRPC).
        self.memfd = memfd

    def close(self) -> None:
        with contextlib.suppress(BufferError):  # an array still views it: unmapped with it
            self.mm.close()


def _round_up(nbytes: int) -> int:
    return max(_MIN_REGION, 1 << (max(nbytes, 1) - 1).bit_length())


def _wire_array(inp: InferInput) -> np.ndarray[Any, Any] | None:
    """The input's data when its memory is its wire form (native fixed-width numbers)."""
    data = inp.data
    if type(data) is not np.ndarray or data.dtype.kind not in "biuf" or not data.dtype.isnative:
        return None
    try:
        return data if datatype_of(data.dtype) == inp.datatype else None
    except NbinferError:
        return None


def _element_bytes(datatype: str, shape: list[int]) -> int | None:
    """Bytes of a fixed-width tensor (None for BYTES, BF16 and unknown datatypes)."""
    if datatype in ("BYTES", "BF16"):
        return None
    try:
        itemsize = numpy_dtype(datatype).itemsize
    except NbinferError:
        return None
    return int(np.prod(shape, dtype=np.int64)) * itemsize


class _SharedView:
    """A reply whose shared-memory outputs read from leased regions (an ``InferResult`` view)."""

    __slots__ = ("_arrays", "_inner", "_shared", "names")

    def __init__(self, inner: Any, arrays: dict[int, np.ndarray[Any, Any]]) -> None:
        self._inner = inner
        self._arrays = arrays
        self._shared = frozenset(arrays)
        self.names: list[str] = inner.names

    @property
    def model_name(self) -> str:
        return str(self._inner.model_name)

    @property
    def model_version(self) -> str:
        return str(self._inner.model_version)

    @property
    def id(self) -> str:
        return str(self._inner.id)

    @property
    def parameters(self) -> Parameters:
        return self._inner.parameters  # type: ignore[no-any-return]

    def array(self, index: int) -> np.ndarray[Any, Any] | None:
        if index not in self._shared:
            return self._inner.array(index)  # type: ignore[no-any-return]
        arr = self._arrays.get(index)
        if arr is None:
            raise InvalidInputError(
                f"output {self.names[index]!r} was released: its shared-memory region went "
                "back to the pool (keep the array, or .copy() it, before release())",
                tensor=self.names[index],
            )
        return arr

    def output(self, index: int) -> InferOutput:
        out: InferOutput = self._inner.output(index)
        arr = self._arrays.get(index)
        return out if arr is None else dataclasses.replace(out, data=arr)

    def response(self) -> InferResponse:
        base: InferResponse = self._inner.response()
        outputs = [self.output(i) for i in range(len(self.names))]
        return dataclasses.replace(base, outputs=outputs)

    def release(self) -> None:
        self._arrays = {}


class SharedMemoryPool:
    """The regions of one client: leased per request, registered once, cleaned on close.

    Thread-safe (a sync client's ``async_infer`` threads share it). ``mode`` is the client's
    ``shared_memory=`` option: ``"auto"`` uses it for tensors of at least
    :data:`SHM_THRESHOLD` bytes once the server advertises the extension and a first region
    registers (any failure turns it off for this client, quietly); ``True`` uses it for every
    fixed-width tensor and raises when the server cannot.
    """

    def __init__(self, mode: SharedMemoryMode, *, url: str = "") -> None:
        self.mode = mode
        self._url = url
        #: The local server's memfd socket (None: POSIX regions over HTTP / gRPC).
        self._channel: _FdChannel | None = None
        self.threshold = 1 if mode is True else SHM_THRESHOLD
        self.enabled: bool | None = None  # None: not probed yet
        self._lock = threading.Lock()
        self._free: dict[int, list[_Region]] = {}
        self._regions: dict[str, _Region] = {}
        self._mapped = 0
        self._pid = os.getpid()
        self._prefix = f"{_PREFIX}{self._pid}_"
        # (model, version, input signature) -> {output: nbytes} seen in replies; None: the
        # outputs of that signature stay in the reply (their size changed once)
        self._sizes: dict[tuple[Any, ...], dict[str, int] | None] = {}
        self._closed = False

    # -- deciding ---------------------------------------------------------------------------

    def wants(self, inputs: InferRequest | Mapping[str, Any]) -> bool:
        """Cheap check: does this request (or ``{name: array}``) carry a big array?"""
        if self.enabled is False or self._closed or os.getpid() != self._pid:
            return False  # a forked child must not write into its parent's regions
        if isinstance(inputs, InferRequest):
            values: Any = (i.data for i in inputs.inputs)
        else:
            values = inputs.values()
        threshold = self.threshold
        return any(type(v) is np.ndarray and v.nbytes >= threshold for v in values)

    def _probe(self, binding: Binding, opts: CallOptions) -> Op[bool]:
        if self.enabled is not None:
            return self.enabled
        try:
            meta = yield from binding.server_metadata(opts)
        except NbinferError:
            if self.mode is True:
                raise
            return False  # the infer itself will say what is wrong; probe again next time
        ok = "system_shared_memory" in meta.extensions
        if not ok and self.mode is True:
            raise UnsupportedError(
                "shared_memory=True, but the server does not advertise system_shared_memory"
            )
        if ok:
            sweep_orphans()
            path = local_server_shm_socket(self._url) if self._url else None
            if path is not None and memfd_supported():
                with self._lock:  # calls probing at once share one channel (a second one,
                    # replacing the first, would drop the regions registered over that one)
                    if self._channel is None and not self._closed:
                        self._channel = _FdChannel(path)
        self.enabled = ok
        return ok

    def _disable(self, why: object) -> None:
        if self.mode is True:
            raise UnsupportedError(f"shared_memory=True, but the server cannot use it: {why}")
        logger.info("shared memory off for this client (sending tensors instead): %s", why)
        self.enabled = False

    # -- leases ----------------------------------------------------------------------------

    def _lease(self, binding: Binding, nbytes: int, opts: CallOptions) -> Op[_Region | None]:
        capacity = _round_up(nbytes)
        with self._lock:
            free = self._free.get(capacity)
            if free:
                return free.pop()
            if self._mapped + capacity > _MAX_POOL:
                return None
            self._mapped += capacity
            # a fresh random name per region: seeing one in /dev/shm tells nothing of the next
            name = f"{self._prefix}{secrets.token_hex(16)}"
        region = yield from self._create(binding, name, capacity, opts)
        if region is None:
            with self._lock:
                self._mapped -= capacity
        return region

    def _create(
        self, binding: Binding, name: str, capacity: int, opts: CallOptions
    ) -> Op[_Region | None]:
        channel = self._channel
        if channel is not None:
            try:
                return self._create_memfd(channel, name, capacity)
            except _FdPassError as exc:
                if exc.status == 429:  # the server's cap on regions: this tensor travels
                    logger.info("no shared memory region (sending the tensor): %s", exc)
                    return None
                why: object = exc
            except (OSError, ValueError) as exc:  # no socket, or a reply that is not JSON
                why = exc
            logger.info("memfd regions off for this client (POSIX shm instead): %s", why)
            self._forget_channel(channel)
        return (yield from self._create_posix(binding, name, capacity, opts))

    def _forget_channel(self, channel: _FdChannel) -> None:
        """Stop using ``channel`` and forget the regions registered over it.

        Closing it drops them on the server: free ones are unmapped now, leased ones when they
        come back.
        """
        idle: list[_Region] = []
        with self._lock:
            if self._channel is channel:
                self._channel = None
            for region in [r for r in self._regions.values() if r.memfd]:
                del self._regions[region.name]
                self._mapped -= region.capacity
            for capacity, free in self._free.items():
                idle += [r for r in free if r.memfd]
                self._free[capacity] = [r for r in free if not r.memfd]
        channel.close()
        for region in idle:
            region.close()

    def _create_memfd(self, channel: _FdChannel, name: str, capacity: int) -> _Region:
        """A sealed memfd region handed to the server over its socket (a short local call)."""
        fd = _sealed_memfd(name, capacity)
        try:
            mm = mmap.mmap(fd, capacity, flags=_MAP_FLAGS)
            try:
                channel.request({"op": "register", "name": name}, fd)
            except BaseException:
                mm.close()
                raise
        finally:
            os.close(fd)
        region = _Region(name, mm, capacity, memfd=True)
        with self._lock:
            self._regions[name] = region
        logger.debug("memfd shared memory region %s registered (%d B)", name, capacity)
        return region

    def _create_posix(
        self, binding: Binding, name: str, capacity: int, opts: CallOptions
    ) -> Op[_Region | None]:
        shm = _posixshmem()
        key = "/" + name
        try:
            fd = shm.shm_open(key, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        except OSError as exc:  # no /dev/shm here
            self._disable(exc)
            return None
        try:
            try:
                os.ftruncate(fd, capacity)
                # reserve the pages now: a full /dev/shm (64 MB in a default container) then
                # fails here instead of killing this process with SIGBUS on the first copy
                os.posix_fallocate(fd, 0, capacity)
                mm = mmap.mmap(fd, capacity, flags=_MAP_FLAGS)
            except OSError as exc:
                logger.info(
                    "no shared memory region of %d B (sending the tensor): %s", capacity, exc
                )
                return None
            finally:
                os.close(fd)
            body = {"key": key, "offset": 0, "byte_size": capacity}
            try:
                yield from binding.shm_register("system", name, body, opts)
            except LimitExceededError as exc:  # the server's cap on regions: this tensor
                mm.close()  # travels in the request; later ones try again
                logger.info("no shared memory region (sending the tensor): %s", exc)
                return None
            except (InvalidInputError, UnsupportedError) as exc:
                mm.close()
                self._disable(exc)
                return None
            except BaseException:
                mm.close()
                raise
        finally:
            shm.shm_unlink(key)  # the server holds it now; no name is left behind
        region = _Region(name, mm, capacity)
        with self._lock:
            self._regions[name] = region
        logger.debug("shared memory region %s registered (%d B)", name, capacity)
        return region

    def _give_back(self, region: _Region) -> None:
        with self._lock:
            if self._closed or region.name not in self._regions:
                region.close()
                return
            self._free.setdefault(region.capacity, []).append(region)

    def _output_array(self, region: _Region, out: InferOutput) -> np.ndarray[Any, Any]:
        """A read-only view on ``region``; the region returns to the pool when it is garbage."""
        nbytes = _element_bytes(out.datatype, list(out.shape)) or 0
        owner = (ctypes.c_ubyte * region.capacity).from_buffer(region.mm)
        weakref.finalize(owner, self._give_back, region)
        return tensor_from_bytes(memoryview(owner)[:nbytes], out.datatype, out.shape, name=out.name)

    # -- the infer path --------------------------------------------------------------------

    def infer(
        self,
        binding: Binding,
        request: InferRequest,
        opts: CallOptions,
        send: Callable[[InferRequest], Op[tuple[Any, Headers]]],
    ) -> Op[InferResult]:
        """Send ``request`` with its big tensors in leased regions; returns the result.

        ``send`` is the client's plain infer op (a reply view and the reply headers).
        """
        ok = yield from self._probe(binding, opts)
        if not ok:
            view, headers = yield from send(request)
            return InferResult(view, headers)
        leases: list[_Region] = []  # input regions: back to the pool once the reply is in
        out_leases: dict[str, _Region] = {}
        try:
            inputs = []
            for inp in request.inputs:
                data = _wire_array(inp)
                region = None
                if data is not None and data.nbytes >= self.threshold and self.enabled:
                    region = yield from self._lease(binding, data.nbytes, opts)
                if region is None or data is None:
                    inputs.append(inp)
                    continue
                leases.append(region)
                np.copyto(np.ndarray(data.shape, data.dtype, region.mm), data, casting="no")
                params = {**inp.parameters, _REGION: region.name, _BYTE_SIZE: data.nbytes}
                inputs.append(dataclasses.replace(inp, data=None, parameters=params))
            key = (
                request.model_name,
                request.model_version,
                tuple((i.name, i.datatype, tuple(i.shape)) for i in request.inputs),
            )
            outputs = yield from self._outputs(binding, request, key, out_leases, opts)
            shipped = dataclasses.replace(request, inputs=inputs, outputs=outputs)
            try:
                view, headers = yield from send(shipped)
            except RemoteInvalidInputError:
                if not out_leases or "sequence_id" in request.parameters:
                    raise
                # an output outgrew the size seen before (a data-dependent shape): send it
                # over the network from now on for these inputs
                self._sizes[key] = None
                leases.extend(out_leases.values())
                out_leases.clear()
                shipped.outputs = list(request.outputs)
                view, headers = yield from send(shipped)
            result = self._result(view, headers, key, out_leases)
        finally:
            for region in leases:
                self._give_back(region)
            for region in out_leases.values():  # only on failure
                self._drop_after_failure(region)
        return result

    def _drop_after_failure(self, region: _Region) -> None:
        """An output region of a failed request: a memfd one is never leased again.

        The server may have handed it to the model to compute into (``output_array``), and a
        model thread the server gave up on may still write there: unregistered and unmapped
        (the server's mapping goes once that thread lets go), it cannot reach a later request.
        """
        if not region.memfd:
            self._give_back(region)
            return
        with self._lock:
            known = self._regions.pop(region.name, None) is not None
            if known:
                self._mapped -= region.capacity
            channel = self._channel
        if known and channel is not None:
            channel.unregister(region.name)
        region.close()

    def _outputs(
        self,
        binding: Binding,
        request: InferRequest,
        key: tuple[Any, ...],
        leases: dict[str, _Region],
        opts: CallOptions,
    ) -> Op[list[RequestedOutput]]:
        """The requested outputs, those known to be big pointed at regions leased into ``leases``.

        An output's size is known once a reply to inputs of the same names, datatypes and
        shapes has carried it; until then the outputs travel in the reply.
        """
        sizes = self._sizes.get(key)
        if not sizes:
            return list(request.outputs)
        asked = request.outputs or [RequestedOutput(name) for name in sizes]
        outputs: list[RequestedOutput] = []
        for out in asked:
            nbytes = sizes.get(out.name, 0)
            region = None
            if nbytes >= self.threshold and not out.class_count and self.enabled:
                region = yield from self._lease(binding, nbytes, opts)
            if region is None:
                outputs.append(out)
                continue
            leases[out.name] = region
            params = {**out.parameters, _REGION: region.name, _BYTE_SIZE: region.capacity}
            # binary_data off beside the region, as tritonclient's set_shared_memory does
            outputs.append(dataclasses.replace(out, binary_data=False, parameters=params))
        return outputs

    def _result(
        self, view: Any, headers: Headers, key: tuple[Any, ...], leases: dict[str, _Region]
    ) -> InferResult:
        """The result, its shared-memory outputs as views on their (still leased) regions."""
        if isinstance(view, InferResponse):
            view = _Decoded(view)
        arrays: dict[int, np.ndarray[Any, Any]] = {}
        seen: dict[str, int] = {}
        for index, name in enumerate(view.names):
            out = view.output(index)
            nbytes = _element_bytes(out.datatype, list(out.shape))
            if nbytes is not None:
                seen[name] = nbytes
            region = leases.pop(name, None)
            if region is not None:
                arrays[index] = self._output_array(region, out)
        for region in leases.values():  # asked for but not returned
            self._give_back(region)
        leases.clear()
        if key not in self._sizes or self._sizes[key] is not None:
            if len(self._sizes) >= _MAX_SIGNATURES:
                self._sizes.clear()  # many input shapes (e.g. ragged chunks): start over
            self._sizes[key] = seen
        return InferResult(_SharedView(view, arrays) if arrays else view, headers)

    # -- closing ---------------------------------------------------------------------------

    def close(self, binding: Binding, opts: CallOptions) -> Op[None]:
        """Unregister every region and unmap those no array views any more (idempotent)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            regions = list(self._regions.values())
            self._regions.clear()
            self._free.clear()
            channel, self._channel = self._channel, None
        posix: list[_Region] = []
        for region in regions:
            if region.memfd:
                if channel is not None:  # before this returns, as over HTTP
                    channel.unregister(region.name)
                region.close()
                continue
            posix.append(region)
        deadline = time.monotonic() + HELD_WAIT_S  # for them all
        for region in posix:
            unregister = functools.partial(binding.shm_unregister, "system", region.name, opts)
            try:
                yield from unregister_when_free(unregister, max(0.0, deadline - time.monotonic()))
            except ServerError as exc:  # still held when the time was up
                logger.warning("could not unregister shared memory region %s: %s", region.name, exc)
            except NbinferError as exc:
                logger.debug("could not unregister shared memory region %s: %s", region.name, exc)
            region.close()
        if channel is not None:  # the server drops whatever was registered over it
            channel.close()
        return None


def unregister_when_free(unregister: Callable[[], Op[None]], wait: float) -> Op[None]:
    """Run the op ``unregister()`` makes; while the server refuses, ask again for ``wait`` s.

    A refusal is an answer (a :class:`~nbinfer.errors.ServerError`: a request still holds the
    region, as Triton says for a moment after answering); it is asked again after a growing
    pause. ``wait=0`` asks once.

    Raises:
        ServerError: The last refusal, once ``wait`` has passed.
        NbinferError: Any other failure (an unreachable server), at once.
    """
    deadline = time.monotonic() + wait
    delay = 0.005
    while True:
        try:
            yield from unregister()
            return None
        except ServerError:
            if time.monotonic() + delay > deadline:
                raise
        yield Pause(delay)
        delay = min(2 * delay, 0.1)
