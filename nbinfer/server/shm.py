"""Shared-memory extensions of the embedded server: system (POSIX) and CUDA regions.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

A client registers a region it created (``name`` -> POSIX shm ``key``, ``offset``,
``byte_size``); inputs whose parameters name that region (``shared_memory_region``,
``shared_memory_byte_size``, ``shared_memory_offset``) are read from it (one copy), and
requested outputs with those parameters are written into it instead of travelling in the
response. A region belongs to the identity of the caller that registered it (the uid of a
loopback peer, see ``peers.py``): every later use (read, write, status, unregister) from
another identity answers exactly as for an unknown name, so one local user can neither use nor
learn of another's regions.

The caller must own the object it registers: the server opens it with its own rights, so
without that check any local user could have it read or overwrite another user's object (a
confused deputy). The owner is the ``st_uid`` of the descriptor the server opened (``fstat``,
no race with a rename); it must be the caller's uid (the server's own for in-process calls).
A caller whose uid is unknown (:data:`~nbinfer.server.peers.REMOTE`: not a loopback peer, or
its lookup failed) cannot prove anything and is refused unless the operator allowed it
(``allow_remote``, ``--allow-remote-shm``). Regions hold descriptors (one per object: regions
of the same object share it), so they are capped per caller and in all (429 /
RESOURCE_EXHAUSTED naming the limit and its flag).

The server opens ``/dev/shm/<key>`` itself (``shm_open``), never through
``multiprocessing.shared_memory`` whose resource tracker would unlink the client's segment, and
copies with ``pread`` / ``pwrite`` after checking the object's current size: it never maps the
client's object, so a client that truncates it gets a 400 instead of crashing the server with
SIGBUS. A sealed memfd handed over a Unix socket (``fdpass.py``) cannot be truncated: those
regions are mapped (:meth:`SharedMemoryManager.register_mapped`), inputs read from the mapping
without a copy and outputs written straight into it.

Example::

    shm = SharedMemoryManager()
    shm.register("in", "/my_key", offset=0, byte_size=128)
    arr = shm.read("in", offset=0, byte_size=64, datatype="FP32", shape=[16], tensor="INPUT0")
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import math
import mmap
import os
import stat
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError, LimitExceededError, NbinferError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.tensors import tensor_from_bytes, tensor_to_bytes
from nbinfer.server.paths import check_shm_key
from nbinfer.server.peers import IN_PROCESS

__all__ = [
    "MAX_SHM_REGIONS",
    "MAX_SHM_REGIONS_PER_CALLER",
    "SHM_BYTE_SIZE",
    "SHM_OFFSET",
    "SHM_REGION",
    "SharedMemoryManager",
    "shm_reference",
]

logger = logging.getLogger("nbinfer")

SHM_REGION = "shared_memory_region"
SHM_BYTE_SIZE = "shared_memory_byte_size"
SHM_OFFSET = "shared_memory_offset"

#: Registered regions in all (``--max-shm-regions``): each holds one descriptor.
MAX_SHM_REGIONS = 256
#: Registered regions of one caller identity (``--max-shm-regions-per-caller``).
MAX_SHM_REGIONS_PER_CALLER = 64

_CUDA_MISSING = "CUDA shared memory needs a CUDA device; none is available on this server"


def _int_param(params: Mapping[str, Any], key: str, what: str, default: int | None) -> int:
    value = params.get(key)
    if value is None:
        if default is None:
            raise InvalidInputError(f"{what}: parameter {key!r} is required with {SHM_REGION}")
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInputError(f"{what}: parameter {key!r} must be an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError as exc:
        raise InvalidInputError(
            f"{what}: parameter {key!r} must be an integer, got {value!r}"
        ) from exc
    if number < 0 or number != float(value):
        raise InvalidInputError(f"{what}: parameter {key!r} must be >= 0, got {value!r}")
    return number


def shm_reference(params: Mapping[str, Any], what: str) -> tuple[str, int, int] | None:
    """``(region, offset, byte_size)`` named by a tensor's parameters, or None (no shm).

    Raises:
        InvalidInputError: the parameters are malformed (names the tensor and the parameter).
    """
    region = params.get(SHM_REGION)
    if region is None:
        return None
    if not isinstance(region, str) or not region:
        raise InvalidInputError(f"{what}: {SHM_REGION} must be a non-empty string, got {region!r}")
    byte_size = _int_param(params, SHM_BYTE_SIZE, what, None)
    offset = _int_param(params, SHM_OFFSET, what, 0)
    return region, offset, byte_size


def _open_key(key: str, region: str, uid: int | None) -> tuple[int, os.stat_result]:
    """Open the POSIX shm object ``key`` (a regular file, not empty): its fd and its stat.

    With ``uid``, the object must belong to it: checked first, so another user's object is
    refused before anything else about it (its type, its size) is told.
    """
    name = check_shm_key(key)
    try:
        try:
            posixshmem = importlib.import_module("_posixshmem")
            fd = int(posixshmem.shm_open(name, os.O_RDWR, mode=0o600))
        except ImportError:  # pragma: no cover - platforms without _posixshmem
            fd = os.open(os.path.join("/dev/shm", name[1:]), os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError as exc:
        raise InvalidInputError(
            f"unable to open shared memory key {key!r}: no such shared memory object "
            "(create it before registering)"
        ) from exc
    except OSError as exc:
        raise InvalidInputError(
            f"unable to open shared memory key {key!r}: {exc.strerror or exc}"
        ) from exc
    try:
        info = os.fstat(fd)
    except OSError as exc:  # pragma: no cover - fstat of an open fd
        os.close(fd)
        raise InvalidInputError(f"unable to open shared memory key {key!r}: {exc}") from exc
    if uid is not None and info.st_uid != uid:
        os.close(fd)
        raise InvalidInputError(
            f"shared memory region {region!r}: refused, shared memory key {key!r} belongs to "
            f"another user; only objects created by the caller's own user (uid {uid}) can be "
            "registered"
        )
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        os.close(fd)
        what = "has size 0" if stat.S_ISREG(info.st_mode) else "is not a shared memory object"
        raise InvalidInputError(f"shared memory key {key!r} {what}")
    return fd, info


def _owner_uid(owner: str) -> int | None:
    """The uid an object registered by ``owner`` must belong to (None: remote, unknown)."""
    if owner == IN_PROCESS:
        return os.geteuid()
    kind, _, uid = owner.partition(":")
    return int(uid) if kind == "uid" and uid.isdigit() else None


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` from ``fd`` at ``offset``; returns the bytes read (short at end of file)."""
    done = 0
    while done < len(view):
        if hasattr(os, "preadv"):
            n = os.preadv(fd, [view[done:]], offset + done)
        else:  # pragma: no cover - platforms without preadv
            chunk = os.pread(fd, len(view) - done, offset + done)
            n = len(chunk)
            view[done : done + n] = chunk
        if n <= 0:
            break
        done += n
    return done


def _decode(
    view: memoryview,
    datatype: str,
    shape: list[int],
    tensor: str,
    what: str,
    region: str,
    offset: int,
) -> np.ndarray[Any, Any]:
    try:
        return tensor_from_bytes(view, datatype, shape, name=tensor)
    except InvalidInputError as exc:
        raise InvalidInputError(
            f"{what} in shared memory region {region!r} (offset {offset}, "
            f"byte_size {view.nbytes}): {exc.message}",
            tensor=tensor,
        ) from exc


def _fixed_width(arr: np.ndarray[Any, Any], datatype: str) -> bool:
    """Whether ``arr``'s memory is already ``datatype``'s wire form (little-endian numbers)."""
    if datatype in ("BYTES", "BF16", "BOOL") or arr.dtype.kind not in "biuf":
        return False
    try:
        return bool(arr.dtype == numpy_dtype(datatype))
    except NbinferError:
        return False


def _same_memory(dst: np.ndarray[Any, Any], arr: np.ndarray[Any, Any]) -> bool:
    """Whether ``arr`` already is ``dst`` (same address, layout and type: nothing to copy)."""
    return (
        np.may_share_memory(dst, arr)  # cheap bounds check first
        and arr.__array_interface__["data"][0] == dst.__array_interface__["data"][0]
        and arr.strides == dst.strides
        and arr.dtype == dst.dtype
    )


@dataclass(slots=True)
class _Region:
    """A registered system region: the client's shm object, used through its descriptor.

    Regions of the same object share one descriptor (the manager counts its users).

    Read and written with ``pread`` / ``pwrite``, never mapped: a client that truncates the
    object cannot fault the server, it gets a 400.
    """

    name: str
    key: str
    offset: int
    byte_size: int
    fd: int
    owner: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: A sealed memfd's mapping (``fdpass.py``): used in place of ``fd``, which is -1.
    mapping: mmap.mmap | None = None
    #: Inputs may be views of the mapping (the caller is the server's own user).
    trusted: bool = False

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "offset": self.offset,
            "byte_size": self.byte_size,
        }

    def check(self, start: int, size: int, what: str) -> None:
        """Refuse (400) when the object no longer holds ``start .. start + size``; lock held."""
        if self.mapping is not None:
            return  # sealed: its size cannot change
        if self.fd < 0:
            raise InvalidInputError(
                f"{what}: shared memory region {self.name!r} was unregistered during the request"
            )
        try:
            current = os.fstat(self.fd).st_size
        except OSError as exc:  # pragma: no cover - fstat of an open fd
            raise InvalidInputError(f"{what}: shared memory region {self.name!r}: {exc}") from exc
        if start + size > current:
            raise InvalidInputError(
                f"{what}: shared memory region {self.name!r} (key {self.key!r}) now holds "
                f"{current} bytes, fewer than the {start + size} its window needs; the shared "
                "memory object was truncated after registration (register it again)"
            )

    def detach(self) -> int:
        """Stop using the descriptor (waits for a read or write in progress); returns it."""
        with self.lock:
            fd, self.fd = self.fd, -1
            mapping, self.mapping = self.mapping, None
        if mapping is not None:
            # arrays still viewing it keep it mapped until they are garbage
            with contextlib.suppress(BufferError):
                mapping.close()
        return fd


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device (torch is imported only when a driver exists)."""
    if "torch" not in sys.modules:
        if sys.platform.startswith("linux") and not os.path.exists("/proc/driver/nvidia/version"):
            return False
        if importlib.util.find_spec("torch") is None:
            return False
    try:
        torch = importlib.import_module("torch")
        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - broken torch install
        return False


class SharedMemoryManager:
    """The registered shared-memory regions of one server (thread-safe).

    System regions are POSIX shm objects read and written through their descriptors (never
    mapped, so truncation by the client cannot fault the server); CUDA regions are refused unless a
    CUDA device is present (and even then this server does not map CUDA IPC handles yet).

    Args:
        max_regions: Regions registered at once, all callers together (each holds a descriptor).
        max_regions_per_caller: Regions one caller identity may hold at once.
        allow_remote: Let callers whose uid is unknown (:data:`~nbinfer.server.peers.REMOTE`)
            register any object the server's user can open (off: refused).
    """

    def __init__(
        self,
        *,
        max_regions: int = MAX_SHM_REGIONS,
        max_regions_per_caller: int = MAX_SHM_REGIONS_PER_CALLER,
        allow_remote: bool = False,
    ) -> None:
        for what, value in (
            ("max_shm_regions", max_regions),
            ("max_shm_regions_per_caller", max_regions_per_caller),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"{what} must be an integer >= 0, got {value!r}")
        self.max_regions = max_regions
        self.max_regions_per_caller = max_regions_per_caller
        self.allow_remote = allow_remote
        #: Keyed by (owner, name): each identity has its own names, so registering a name
        #: another identity uses neither fails nor tells it that the name exists.
        self._regions: dict[tuple[str, str], _Region] = {}
        #: Regions per owner, registered or being opened (the caps count both).
        self._counts: dict[str, int] = {}
        #: (st_dev, st_ino) -> [descriptor, regions using it]: one descriptor per object.
        self._objects: dict[tuple[int, int], list[int]] = {}
        self._object_of: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    # -- system shared memory -----------------------------------------------------------------
    def register(
        self, name: str, key: str, *, offset: int = 0, byte_size: int, owner: str = IN_PROCESS
    ) -> None:
        """Register system region ``name``: ``byte_size`` bytes at ``offset`` of shm ``key``.

        The region belongs to ``owner`` (the caller's identity): only it can use the region,
        and the object must belong to its uid.

        Raises:
            InvalidInputError: the name is taken, the key cannot be opened, the object is not
                the caller's (or the caller's uid is unknown and remote callers are not
                allowed), or the window ``offset .. offset + byte_size`` does not fit in it.
            LimitExceededError: the caller, or the server, holds as many regions as allowed.
        """
        if not name:
            raise InvalidInputError("a shared memory region needs a non-empty name")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError(f"region {name!r}: offset must be an integer >= 0")
        if isinstance(byte_size, bool) or not isinstance(byte_size, int) or byte_size <= 0:
            raise InvalidInputError(f"region {name!r}: byte_size must be an integer > 0")
        uid = _owner_uid(owner)
        if uid is None and not self.allow_remote:
            raise InvalidInputError(
                f"shared memory region {name!r}: refused, the server could not establish which "
                "local user is calling (not a loopback connection, or the lookup failed), so "
                f"the caller cannot prove that it owns key {key!r}; send the tensors instead, "
                "or start the server with --allow-remote-shm to trust such callers"
            )
        self._reserve(name, owner)
        try:
            fd, info = _open_key(key, name, uid)
            try:
                self._check_window(name, key, info, offset, byte_size)
                spare = self._add(_Region(name, key, offset, byte_size, fd, owner), info)
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            self._release(owner)
            raise
        if spare >= 0:
            os.close(spare)
        logger.info(
            "registered system shared memory region %r (key %r, %d B)", name, key, info.st_size
        )

    def register_mapped(
        self, name: str, fd: int, size: int, *, owner: str, trusted: bool = False
    ) -> _Region:
        """Register ``owner``'s sealed memfd ``fd`` of ``size`` bytes as region ``name``; mapped.

        The caller checked the seals (``fdpass.check_memfd``) and keeps ``fd`` (the mapping
        holds the memory). ``trusted``: inputs may be views of the mapping (the caller is
        the server's own user); otherwise they are copied out first. Returns the region, for
        :meth:`unregister_region`.

        Raises:
            InvalidInputError: the name is taken, or the memfd cannot be mapped.
            LimitExceededError: the caller, or the server, holds as many regions as allowed.
        """
        self._reserve(name, owner)
        try:
            try:
                mapping = mmap.mmap(fd, size)
            except (OSError, ValueError) as exc:
                raise InvalidInputError(
                    f"shared memory region {name!r}: the memfd cannot be mapped: {exc}"
                ) from exc
            region = _Region(name, "memfd", 0, size, -1, owner, mapping=mapping, trusted=trusted)
            with self._lock:
                if (owner, name) in self._regions:
                    mapping.close()
                    raise InvalidInputError(f"shared memory region {name!r} is already registered")
                self._regions[owner, name] = region
        except BaseException:
            self._release(owner)
            raise
        logger.info("registered memfd shared memory region %r (%d B, mapped)", name, size)
        return region

    def unregister_region(self, region: _Region) -> None:
        """Unregister ``region`` if it is still registered (not a later one of the same name)."""
        with self._lock:
            if self._regions.get((region.owner, region.name)) is not region:
                return
            del self._regions[region.owner, region.name]
        self._drop([region])
        self._release(region.owner)

    def _reserve(self, name: str, owner: str) -> None:
        """Count a region for ``owner`` before its key is opened, within the caps."""
        with self._lock:
            if (owner, name) in self._regions:
                raise InvalidInputError(
                    f"shared memory region {name!r} is already registered; unregister it first"
                )
            mine = self._counts.get(owner, 0)
            if mine >= self.max_regions_per_caller:
                raise LimitExceededError(
                    f"shared memory region {name!r}: refused, the limit of "
                    f"{self.max_regions_per_caller} shared memory regions per caller is reached "
                    "(--max-shm-regions-per-caller); unregister regions you no longer use"
                )
            if sum(self._counts.values()) >= self.max_regions:
                raise LimitExceededError(
                    f"shared memory region {name!r}: refused, the limit of {self.max_regions} "
                    "shared memory regions on this server is reached (--max-shm-regions)"
                )
            self._counts[owner] = mine + 1

    def _add(self, region: _Region, info: os.stat_result) -> int:
        """Keep ``region``; returns its new descriptor if the object already had one (else -1).

        Registering one object many times holds one descriptor.
        """
        ident = (info.st_dev, info.st_ino)
        with self._lock:
            if (region.owner, region.name) in self._regions:
                raise InvalidInputError(
                    f"shared memory region {region.name!r} is already registered"
                )
            spare = -1
            held = self._objects.get(ident)
            if held is None:
                self._objects[ident] = [region.fd, 1]
                self._object_of[region.fd] = ident
            else:
                held[1] += 1
                spare, region.fd = region.fd, held[0]
            self._regions[region.owner, region.name] = region
        return spare

    def _drop(self, regions: list[_Region]) -> None:
        """Detach ``regions``; close each descriptor its last region let go."""
        for region in regions:
            fd = region.detach()
            if fd < 0:
                continue
            with self._lock:
                ident = self._object_of.get(fd)
                if ident is not None:
                    held = self._objects[ident]
                    held[1] -= 1
                    if held[1] > 0:
                        continue
                    del self._objects[ident], self._object_of[fd]
            os.close(fd)

    def _release(self, owner: str, count: int = 1) -> None:
        with self._lock:
            left = self._counts.get(owner, 0) - count
            if left > 0:
                self._counts[owner] = left
            else:
                self._counts.pop(owner, None)

    @staticmethod
    def _check_window(
        name: str, key: str, info: os.stat_result, offset: int, byte_size: int
    ) -> None:
        """Refuse a window the object does not hold."""
        if offset + byte_size > info.st_size:
            raise InvalidInputError(
                f"shared memory region {name!r}: offset {offset} + byte_size {byte_size} "
                f"exceeds the {info.st_size} bytes of shared memory key {key!r}"
            )

    def unregister(self, name: str = "", *, owner: str = IN_PROCESS) -> None:
        """Unregister ``owner``'s region ``name`` (all of its regions when empty).

        Unknown names, and other owners' regions, are ignored.
        """
        with self._lock:
            if name:
                region = self._regions.pop((owner, name), None)
                gone = [region] if region is not None else []
            else:
                gone = [r for r in self._regions.values() if r.owner == owner]
                for region in gone:
                    del self._regions[owner, region.name]
        self._drop(gone)
        if gone:
            self._release(owner, len(gone))

    def status(self, name: str = "", *, owner: str = IN_PROCESS) -> list[dict[str, Any]]:
        """``owner``'s registered regions (all, or only ``name``).

        Raises:
            InvalidInputError: ``name`` is not registered by ``owner``.
        """
        with self._lock:
            if not name:
                return [r.status() for r in self._regions.values() if r.owner == owner]
            region = self._regions.get((owner, name))
        if region is None:
            raise InvalidInputError(f"unable to find system shared memory region {name!r}")
        return [region.status()]

    def _window(
        self, region_name: str, offset: int, byte_size: int, what: str, owner: str
    ) -> tuple[_Region, int]:
        with self._lock:
            region = self._regions.get((owner, region_name))
            if region is None:
                known = ", ".join(r.name for r in self._regions.values() if r.owner == owner)
        if region is None:
            raise InvalidInputError(
                f"{what}: shared memory region {region_name!r} is not registered "
                f"(registered: {known or 'none'})"
            )
        if offset + byte_size > region.byte_size:
            raise InvalidInputError(
                f"{what}: offset {offset} + byte_size {byte_size} is out of bounds of shared "
                f"memory region {region_name!r} ({region.byte_size} bytes)"
            )
        return region, region.offset + offset

    def read(
        self,
        region_name: str,
        *,
        offset: int,
        byte_size: int,
        datatype: str,
        shape: list[int],
        tensor: str,
        what: str,
        owner: str = IN_PROCESS,
    ) -> np.ndarray[Any, Any]:
        """Tensor ``tensor`` read from a region into a fresh array (BYTES are decoded).

        The object's current size is checked first (a client may have truncated it since it
        registered the region), and the bytes are copied with ``pread``: the model never
        sees memory the client can change or take away under it.

        Raises:
            InvalidInputError: a region ``owner`` did not register, a window out of its bounds
                or beyond the object's current size, or ``byte_size`` that does not match
                ``datatype`` x ``shape``.
        """
        region, start = self._window(region_name, offset, byte_size, what, owner)
        if region.mapping is not None:
            return self._read_mapped(region, start, byte_size, datatype, shape, tensor, what)
        buf = np.empty(byte_size, dtype=np.uint8)
        view = buf.data
        with region.lock:
            region.check(start, byte_size, what)
            got = _pread_into(region.fd, view, start)
        if got < byte_size:
            raise InvalidInputError(
                f"{what}: shared memory region {region_name!r} was truncated while it was read",
                tensor=tensor,
            )
        return _decode(view, datatype, shape, tensor, what, region_name, offset)

    @staticmethod
    def _read_mapped(
        region: _Region,
        start: int,
        byte_size: int,
        datatype: str,
        shape: list[int],
        tensor: str,
        what: str,
    ) -> np.ndarray[Any, Any]:
        """A mapped region's tensor: a view of the mapping for its own user, else a copy."""
        with region.lock:
            if region.mapping is None:
                raise InvalidInputError(
                    f"{what}: shared memory region {region.name!r} was unregistered during "
                    "the request"
                )
            # read-only: a model cannot write into the client's input region
            view = memoryview(region.mapping).toreadonly()[start : start + byte_size]
        if not region.trusted or datatype in ("BYTES", "BOOL"):
            view = memoryview(bytes(view))  # decoded in two passes: one snapshot of it
        return _decode(view, datatype, shape, tensor, what, region.name, start)

    def write(
        self,
        region_name: str,
        *,
        offset: int,
        byte_size: int,
        arr: np.ndarray[Any, Any],
        datatype: str,
        what: str,
        owner: str = IN_PROCESS,
    ) -> int:
        """Write an output into a region; returns the number of bytes written.

        Raises:
            InvalidInputError: a region ``owner`` did not register, a window out of its bounds
                or beyond the object's current size (truncated by the client), or a window
                too small for the output.
        """
        region, start = self._window(region_name, offset, byte_size, what, owner)
        if region.mapping is not None and _fixed_width(arr, datatype):
            return self._write_mapped(region, start, byte_size, arr, what)
        raw = memoryview(tensor_to_bytes(arr, datatype)).cast("B")
        size = raw.nbytes
        if size > byte_size:
            raise InvalidInputError(
                f"{what}: shared memory region {region_name!r} window of {byte_size} bytes "
                f"(offset {offset}) is too small; the output needs {size} bytes"
            )
        with region.lock:
            region.check(start, size, what)
            if region.mapping is not None:
                region.mapping[start : start + size] = raw
                return size
            done = 0
            while done < size:
                done += os.pwrite(region.fd, raw[done:], start + done)
        return size

    @staticmethod
    def _write_mapped(
        region: _Region, start: int, byte_size: int, arr: np.ndarray[Any, Any], what: str
    ) -> int:
        """Copy a native fixed-width array straight into a mapped region."""
        size = int(arr.nbytes)
        if size > byte_size:
            raise InvalidInputError(
                f"{what}: shared memory region {region.name!r} window of {byte_size} bytes "
                f"is too small; the output needs {size} bytes"
            )
        with region.lock:
            region.check(start, size, what)
            dst = np.ndarray(arr.shape, arr.dtype, buffer=region.mapping, offset=start)
            if not _same_memory(dst, arr):  # else computed in place (output_view): no copy
                np.copyto(dst, arr, casting="no")
        return size

    def output_view(
        self,
        region_name: str,
        *,
        offset: int,
        byte_size: int,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        owner: str = IN_PROCESS,
    ) -> np.ndarray[Any, Any] | None:
        """A writable array on a mapped region's window, for an output written in place.

        Only for a sealed memfd of the server's own user (``trusted``) whose window holds
        ``shape`` x ``dtype`` (native fixed-width numbers); None otherwise (the model then
        gets a fresh array and :meth:`write` copies it). The array keeps the mapping alive
        if the region is unregistered meanwhile; :meth:`write` then refuses the request.
        """
        if dtype.kind not in "biuf" or not dtype.isnative or min(shape, default=0) < 0:
            return None  # np.empty says what is wrong with a negative dimension
        with self._lock:
            region = self._regions.get((owner, region_name))
        nbytes = math.prod(shape) * dtype.itemsize
        if region is None or not region.trusted or nbytes > byte_size:
            return None
        if offset + byte_size > region.byte_size:
            return None
        start = region.offset + offset
        with region.lock:
            if region.mapping is None:
                return None
            # np.frombuffer keeps the memoryview, which holds the mapping: unregistering cannot
            # unmap it under the array (np.ndarray(buffer=...) would not hold it)
            window = memoryview(region.mapping)[start : start + nbytes]
        return np.frombuffer(window, dtype).reshape(shape)

    # -- CUDA shared memory ---------------------------------------------------------------
    def cuda_register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Register a CUDA IPC region: refused here (clear message) unless CUDA exists.

        Raises:
            InvalidInputError: always on this server: without a CUDA device, or because mapping
                CUDA IPC handles is not implemented.
        """
        if not _cuda_available():
            raise InvalidInputError(_CUDA_MISSING)
        raise InvalidInputError(
            f"CUDA shared memory region {name!r}: mapping CUDA IPC handles is not supported by "
            "nbinfer's server yet; use system shared memory or send the tensors"
        )

    def cuda_unregister(self, name: str = "") -> None:
        """Unregister CUDA regions (none are ever registered)."""

    def cuda_status(self, name: str = "") -> list[dict[str, Any]]:
        """The registered CUDA regions (always none).

        Raises:
            InvalidInputError: ``name`` is given (it cannot be registered).
        """
        if name:
            raise InvalidInputError(f"unable to find CUDA shared memory region {name!r}")
        return []

    def close(self) -> None:
        """Close every region, whoever owns it. Idempotent."""
        with self._lock:
            gone = list(self._regions.values())
            self._regions.clear()
            self._counts.clear()
        self._drop(gone)
