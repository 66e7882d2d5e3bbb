"""Which device a model runs on: checking a request, resolving ``auto``, falling back to the CPU.

Owns the device policy every backend shares, so ``cuda:0`` on a machine without a GPU is refused
with the same message whoever asks. Imports no torch at module level (only when a GPU may be
used) and nothing of the server but the error tree.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import sys

from nbinfer.errors import InvalidInputError

__all__ = ["check_device_request", "cpu_fallback", "resolve_device"]

logger = logging.getLogger("nbinfer")


def _nvidia_driver() -> bool:
    """Whether this machine has an NVIDIA driver (a file on Linux, ``nvidia-smi`` elsewhere)."""
    if sys.platform.startswith("linux"):
        return os.path.exists("/proc/driver/nvidia/version")
    return shutil.which("nvidia-smi") is not None


def _torch_installed() -> bool:
    """Whether torch can be imported (without importing it)."""
    return "torch" in sys.modules or importlib.util.find_spec("torch") is not None


def _cuda_driver_present() -> bool:
    """Cheap check for an NVIDIA driver (True when unsure or torch is already imported)."""
    return "torch" in sys.modules or _nvidia_driver()


_FELL_BACK: set[str] = set()


def cpu_fallback(device: str, why: str) -> str:
    """``"cpu"``, logging once per process and reason that ``device`` (``auto``) fell back."""
    if why not in _FELL_BACK:
        _FELL_BACK.add(why)
        logger.warning("device %r: %s; running on the CPU", device, why)
    return "cpu"


def check_device_request(device: str | None) -> str:
    """Validate a device request before anything is loaded; returns it normalised.

    The server calls this at start, so ``--device cuda:0`` on a machine without an NVIDIA
    driver stops with a clear message instead of starting; each model then resolves its own
    device with :meth:`Model.resolve_device`.

    Raises:
        InvalidInputError: an unknown device string, or a CUDA device on a machine without an
            NVIDIA driver.
    """
    dev = (device or "auto").strip().lower()
    if dev in ("cpu", "auto"):
        return dev
    if dev not in ("cuda", "gpu") and not dev.startswith("cuda:"):
        raise InvalidInputError(f"unknown device {device!r}; use 'auto', 'cpu' or 'cuda:N'")
    if dev.startswith("cuda:") and not dev[5:].isdigit():
        raise InvalidInputError(f"unknown device {device!r}; use 'auto', 'cpu' or 'cuda:N'")
    if not _nvidia_driver():
        # Both are named when both are missing: installing torch alone would not help.
        torch = "" if _torch_installed() else " and torch is not installed"
        raise InvalidInputError(
            f"device {device!r} cannot be used: this machine has no NVIDIA driver (no CUDA "
            f"GPU){torch}; use device='cpu', or 'auto' to take a GPU when there is one"
        )
    return dev


def resolve_device(device: str | None = "auto") -> str:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` into a concrete device string.

    torch is consulted only when it is installed and, for ``auto``, only when an NVIDIA driver is
    present, so CPU-only machines never pay for importing it. ``auto`` without a GPU gives
    ``"cpu"`` and logs a warning once.

    Raises:
        InvalidInputError: a CUDA device was asked for but torch or that GPU is missing.
    """
    dev = (device or "auto").strip().lower()
    if dev == "cpu":
        return "cpu"
    if dev not in ("auto", "cuda", "gpu") and not dev.startswith("cuda:"):
        raise InvalidInputError(f"unknown device {device!r}; use 'auto', 'cpu' or 'cuda:N'")
    if dev != "auto":
        check_device_request(device)  # the same message for every backend on a GPU-less machine
    elif not _cuda_driver_present():
        # no NVIDIA driver: no need to import torch (seconds) to know
        return cpu_fallback("auto", "no NVIDIA driver (no CUDA GPU)")
    if not _torch_installed():
        if dev == "auto":
            return cpu_fallback("auto", "torch is not installed, so no GPU can be used")
        raise InvalidInputError(
            f"device {device!r} cannot be used: it needs torch with CUDA and torch is not "
            "installed; use device='cpu' or 'auto'"
        )
    torch = importlib.import_module("torch")
    count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    if dev == "auto":
        return "cuda:0" if count else cpu_fallback("auto", "torch sees no CUDA GPU")
    index = 0 if dev in ("cuda", "gpu") else int(dev.split(":", 1)[1])
    if index >= count:
        raise InvalidInputError(
            f"device {device!r} cannot be used: torch sees {count} CUDA GPU(s); use "
            "device='cpu' or 'auto'"
        )
    return f"cuda:{index}"
