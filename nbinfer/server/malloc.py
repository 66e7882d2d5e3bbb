"""The server process's allocator: big tensors reuse freed memory instead of fresh pages.

Layer: the server (stdlib only); never the client, transports, session, interop or notebook.

glibc serves an allocation of a few MB (a model's output array, a request body) from ``mmap``
or from the top of its heap, and hands the memory back to the kernel when it is freed (the
heap top is trimmed once 2x the last big block is free). The next request's arrays of the same
size then fault every page in again, and the kernel zeroes each one: for ``add_sub`` with 8 MB
outputs that was ~35 % of the server's CPU per call on the local shared-memory path. The
server keeps such memory instead: blocks up to :data:`MMAP_THRESHOLD` come from the heap, and
up to :data:`TRIM_THRESHOLD` of free heap top stays mapped for the next request. The cost is
that much resident memory kept after a burst of big requests.

Set by :func:`keep_freed_memory` once at server start. glibc's own environment variables
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``), when set, are
the operator's choice and left alone; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

logger = logging.getLogger("nbinfer")

#: Blocks below this many bytes come from the heap (glibc's ceiling on 64-bit: 32 MiB).
MMAP_THRESHOLD = 32 << 20
#: Free bytes at the heap top kept mapped for later requests.
TRIM_THRESHOLD = 128 << 20
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_OPERATOR = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory() -> bool:
    """Tune glibc's ``malloc`` as the module says; whether it was done (glibc only)."""
    if not sys.platform.startswith("linux") or any(k in os.environ for k in _OPERATOR):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc, not musl (whose mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    done = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and done
    logger.debug(
        "malloc: thresholds set (mmap %d B, trim %d B): %s", MMAP_THRESHOLD, TRIM_THRESHOLD, done
    )
    return done
