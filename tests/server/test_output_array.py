"""Outputs computed straight into the client's mapped region (``InferContext.output_array``).

A real sealed memfd registered with a real :class:`SharedMemoryManager` (as the server's memfd
socket does), the model-I/O core that runs the model and writes its outputs; no server needed.
The end-to-end path through a running server is in ``test_shm_memfd.py``.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import InferenceError
from nbinfer.protocol.types import InferInput, InferRequest, RequestedOutput
from nbinfer.server import fdpass
from nbinfer.server.model import InferContext, Model, TensorDef
from nbinfer.server.modelio import ModelIO, Timings
from nbinfer.server.shm import SharedMemoryManager
from tests.server.memfd_peer import memfd

pytestmark = pytest.mark.skipif(not fdpass.supported(), reason="memfd sealing is Linux-only")

ROWS = 64
NBYTES = ROWS * 16 * 4


class Doubler(Model):
    """y = 2 * x, computed into ``output_array``; ``seen`` keeps the array it was handed."""

    name = "doubler"
    inputs = (TensorDef("x", "FP32", [-1, 16]),)
    outputs = (TensorDef("y", "FP32", [-1, 16]), TensorDef("n", "INT64", [1]))
    run_in_thread = False

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[np.ndarray[Any, Any]] = []

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        x = inputs["x"]
        out = context.output_array("y", x.shape, np.float32)
        self.seen.append(out)
        np.multiply(x, 2, out=out)
        return {"y": out, "n": np.array([len(x)], np.int64)}


class InPlace(Model):
    """Tries to scale its input in place (a model must not write into the client's region)."""

    name = "in_place"
    inputs = (TensorDef("x", "FP32", [-1, 16]),)
    outputs = (TensorDef("y", "FP32", [-1, 16]),)

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        x = inputs["x"]
        x *= 2
        return {"y": x}


@pytest.fixture()
def shm() -> Iterator[SharedMemoryManager]:
    manager = SharedMemoryManager()
    yield manager
    manager.close()


def _region(shm: SharedMemoryManager, name: str, *, trusted: bool = True) -> int:
    """Register a sealed memfd of 2 x NBYTES as ``name``; returns a descriptor to inspect it."""
    fd = memfd(2 * NBYTES)
    shm.register_mapped(name, os.dup(fd), 2 * NBYTES, owner="uid:1", trusted=trusted)
    return fd


def _in_region(arr: np.ndarray[Any, Any]) -> bool:
    """Whether ``arr`` is memory of a mapped region (a view holding the mapping)."""
    base: Any = arr
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


def _read(fd: int, offset: int = 0) -> np.ndarray[Any, Any]:
    return np.frombuffer(os.pread(fd, NBYTES, offset), np.float32).reshape(ROWS, 16)


def _request(
    x: np.ndarray[Any, Any], out_region: str = "out", *, x_region: str | None = None
) -> InferRequest:
    params: dict[str, Any] = {}
    data: Any = x
    if x_region is not None:
        params = {"shared_memory_region": x_region, "shared_memory_byte_size": NBYTES}
        data = None
    return InferRequest(
        model_name="doubler",
        inputs=[InferInput("x", "FP32", [ROWS, 16], data, params)],
        outputs=[
            RequestedOutput(
                "y",
                parameters={"shared_memory_region": out_region, "shared_memory_byte_size": NBYTES},
            ),
            RequestedOutput("n"),
        ],
    )


def _doubler(shm: SharedMemoryManager, x: np.ndarray[Any, Any]) -> tuple[ModelIO, InferRequest]:
    """The model-I/O core of a :class:`Doubler` on ``shm``, and a request for ``x``."""
    model = Doubler()
    model.finalize()
    return ModelIO(model, shm=shm), _request(x)


def _context(io: ModelIO, request: InferRequest) -> InferContext:
    """A context as the dataplane builds it for ``request`` from caller ``uid:1``."""
    return InferContext(output_buffers=io.output_buffers(request, lambda: "uid:1"))


def _run(model: Model, shm: SharedMemoryManager, request: InferRequest) -> list[Any]:
    """What the dataplane does for one request: check, context with buffers, run, outputs."""
    model.finalize()
    io = ModelIO(model, shm=shm)
    inputs, batch = io.check_inputs(request, lambda: "uid:1")
    ctx = InferContext(model_name=model.name, requested_outputs=io.requested(request))
    ctx.output_buffers = io.output_buffers(request, lambda: "uid:1")
    result = io.run_sync(inputs, ctx, Timings(), 0)
    return io.outputs(result, io.requested(request), request, batch, lambda: "uid:1")


def test_an_output_is_computed_in_the_clients_region_and_sent_without_data() -> None:
    shm = SharedMemoryManager()
    fd = _region(shm, "out")
    model = Doubler()
    x = np.arange(ROWS * 16, dtype=np.float32).reshape(ROWS, 16)
    try:
        outputs = _run(model, shm, _request(x))
        handed = model.seen[0]
        assert _in_region(handed)  # the region itself, not a fresh array
        assert handed.flags.writeable
        y = outputs[0]
        assert y.data is None and y.parameters["shared_memory_region"] == "out"
        assert y.parameters["shared_memory_byte_size"] == NBYTES
        np.testing.assert_array_equal(_read(fd), 2 * x)
        np.testing.assert_array_equal(outputs[1].data, [ROWS])  # not in shm: in the reply
    finally:
        shm.close()
        os.close(fd)


def test_the_output_is_written_into_its_window_at_an_offset() -> None:
    shm = SharedMemoryManager()
    fd = _region(shm, "out")
    model = Doubler()
    x = np.ones((ROWS, 16), np.float32)
    request = _request(x)
    request.outputs[0].parameters["shared_memory_offset"] = NBYTES
    try:
        _run(model, shm, request)
        assert _in_region(model.seen[0])
        np.testing.assert_array_equal(_read(fd, NBYTES), 2 * x)
        np.testing.assert_array_equal(_read(fd), np.zeros((ROWS, 16), np.float32))
    finally:
        shm.close()
        os.close(fd)


@pytest.mark.parametrize(
    "case", ["another user's region", "region shared with the input", "no shared memory"]
)
def test_a_fresh_array_where_the_region_cannot_be_handed_out(
    shm: SharedMemoryManager, case: str
) -> None:
    """Another user's region (it could change it while the model reads it back), a region an
    input is read from in place, or an output travelling in the reply: ``np.empty``, copied
    into the region (if any) afterwards as before."""
    fd = _region(shm, "out", trusted=case != "another user's region")
    x = np.full((ROWS, 16), 3, np.float32)
    if case == "region shared with the input":
        os.pwrite(fd, x.tobytes(), NBYTES)  # the input sits in the second half
        request = _request(x, x_region="out")
        request.inputs[0].parameters["shared_memory_offset"] = NBYTES
    elif case == "no shared memory":
        request = _request(x)
        request.outputs[0] = RequestedOutput("y")
    else:
        request = _request(x)
    model = Doubler()
    try:
        outputs = _run(model, shm, request)
        handed = model.seen[0]
        assert not _in_region(handed)
        assert handed.shape == (ROWS, 16) and handed.dtype == np.float32
        if case == "no shared memory":
            np.testing.assert_array_equal(outputs[0].data, 2 * x)
        else:
            np.testing.assert_array_equal(_read(fd), 2 * x)
    finally:
        os.close(fd)


def test_only_the_declared_datatype_and_one_array_per_output_are_handed_out(
    shm: SharedMemoryManager,
) -> None:
    fd = _region(shm, "out")
    io, request = _doubler(shm, np.zeros((ROWS, 16), np.float32))
    try:
        wrong = _context(io, request).output_array("y", (ROWS, 16), np.float64)  # y is FP32
        assert not _in_region(wrong) and wrong.dtype == np.float64
        ctx = _context(io, request)
        first = ctx.output_array("y", (ROWS, 16), np.float32)
        second = ctx.output_array("y", (ROWS, 16), np.float32)
        assert _in_region(first) and not _in_region(second)
        too_big = _context(io, request)
        arr = too_big.output_array("y", (2 * ROWS + 1, 16), np.float32)  # beyond the window
        assert not _in_region(arr) and arr.shape == (2 * ROWS + 1, 16)
        with pytest.raises(ValueError, match="negative"):  # as np.empty says it
            _context(io, request).output_array("y", (-1, 16), np.float32)
    finally:
        os.close(fd)


def test_without_a_server_output_array_is_a_fresh_array() -> None:
    """A context built by hand (a test, the exported runtime): ``np.empty``."""
    arr = InferContext().output_array("y", [2, 3], "float32")
    assert arr.shape == (2, 3) and arr.dtype == np.float32 and arr.flags.writeable


def test_a_mapped_input_is_read_only_to_the_model(shm: SharedMemoryManager) -> None:
    fd = _region(shm, "in")
    x = np.full((ROWS, 16), 5, np.float32)
    os.pwrite(fd, x.tobytes(), 0)
    request = InferRequest(
        model_name="in_place",
        inputs=[
            InferInput(
                "x",
                "FP32",
                [ROWS, 16],
                None,
                {"shared_memory_region": "in", "shared_memory_byte_size": NBYTES},
            )
        ],
    )
    model = InPlace()
    model.finalize()
    io = ModelIO(model, shm=shm)
    try:
        inputs, _ = io.check_inputs(request, lambda: "uid:1")
        assert not inputs["x"].flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            model.predict(inputs, InferContext())
        np.testing.assert_array_equal(_read(fd), x)  # the client's region is unchanged
    finally:
        os.close(fd)


def test_an_output_array_of_a_region_unregistered_meanwhile_fails_the_request(
    shm: SharedMemoryManager,
) -> None:
    """The client went away mid-request: the array still works (the mapping lives while it
    does), and writing the output answers 400 naming the region."""
    fd = _region(shm, "out")
    io, request = _doubler(shm, np.ones((ROWS, 16), np.float32))
    try:
        arr = _context(io, request).output_array("y", (ROWS, 16), np.float32)
        shm.unregister("out", owner="uid:1")
        arr[:] = 7  # still mapped: no fault
        with pytest.raises(Exception, match="'out' is not registered") as info:
            io.outputs(
                {"y": arr, "n": np.array([ROWS])}, ["y", "n"], request, ROWS, lambda: "uid:1"
            )
        assert not isinstance(info.value, InferenceError)
    finally:
        os.close(fd)
