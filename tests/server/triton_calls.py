"""The calls Triton's sequence / config client examples make, as helpers over tritonclient.

Our own code (written after reading what ``simple_*_sequence_*_client.py`` send and check):
one sequence per call, a sync request at a time over HTTP or gRPC, or several sequences
interleaved on one gRPC stream. Shared by ``tests/server/test_triton_sequences.py``,
``tests/server/test_config_roundtrip.py`` and ``tests/peers/test_triton_fidelity.py`` so the
same calls run against nbinfer and a real tritonserver.
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th
from google.protobuf import json_format
from tritonclient.utils import InferenceServerException

from nbinfer.server.launcher import LocalServer

#: The Triton-layout repository of Python-backend stand-ins (see its README.md).
EXAMPLES = Path(__file__).parent / "triton_examples"

#: The values the examples send (a first value, then these; the second sequence negated).
VALUES = [11, 7, 5, 3, 2, 0, 1]


def addresses(server: Any) -> dict[str, str]:
    """A server's ``host:port`` per protocol, as tritonclient takes them (nbinfer or Triton)."""
    return {
        "http": server.http_url.removeprefix("http://"),
        "grpc": server.grpc_url.removeprefix("grpc://"),
    }


#: The one model file of every model whose name starts with a key (they differ in their
#: config.pbtxt only): written into each such model's ``1/`` by :func:`examples_repository`.
SHARED_MODELS = {
    "probe_": Path(__file__).parent / "triton_probe_model.py",
    "batch_": Path(__file__).parent / "triton_batch_model.py",
}


def examples_repository(dest: Path) -> Path:
    """Write the served repository to ``dest``: ``triton_examples/`` with the ``1/model.py``
    of the models :data:`SHARED_MODELS` names. Returns ``dest``."""
    shutil.copytree(EXAMPLES, dest, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    for prefix, source in SHARED_MODELS.items():
        for model_dir in sorted(dest.glob(f"{prefix}*")):
            (model_dir / "1").mkdir(exist_ok=True)
            shutil.copyfile(source, model_dir / "1" / "model.py")
    return dest


#: The models of the served repository (the directories with a config.pbtxt).
MODELS = tuple(sorted(p.name for p in EXAMPLES.iterdir() if (p / "config.pbtxt").is_file()))


@contextlib.contextmanager
def serving(repository: Path | None = None) -> Iterator[dict[str, str]]:
    """nbinfer's server (no demo models, no token) on ``repository``, by default a fresh
    :func:`examples_repository`: :func:`addresses`."""
    with tempfile.TemporaryDirectory(prefix="triton-examples-") as scratch:
        if repository is None:
            repository = examples_repository(Path(scratch) / "models")
        # loads with a config override replace a repository model, as on Triton
        server = LocalServer(
            model_repository=repository,
            demo=False,
            device="cpu",
            auth_token=None,
            allow_model_replace=True,
        )
        server.start()
        try:
            yield addresses(server)
        finally:
            server.stop()


def _module(protocol: str) -> Any:
    return th if protocol == "http" else tg


def client(protocol: str, url: str) -> Any:
    """A tritonclient of ``protocol`` (``http`` / ``grpc``) for ``host:port``."""
    return _module(protocol).InferenceServerClient(url)


def infer_one(
    c: Any,
    protocol: str,
    model: str,
    value: int,
    *,
    batched: bool = True,
    output: str = "OUTPUT",
    version: str = "",
    **sequence: Any,
) -> Any:
    """One INT32 ``INPUT`` request (``[1, 1]`` when ``batched``); the first element of OUTPUT."""
    mod = _module(protocol)
    data = np.full([1, 1] if batched else [1], value, dtype=np.int32)
    inp = mod.InferInput("INPUT", list(data.shape), "INT32")
    inp.set_data_from_numpy(data)
    result = c.infer(
        model, [inp], model_version=version, outputs=[mod.InferRequestedOutput(output)], **sequence
    )
    first = result.as_numpy(output).ravel()[0]
    return first.decode() if isinstance(first, bytes) else first


def run_sequence(
    protocol: str, url: str, model: str, sequence_id: int | str, values: list[int], **kw: Any
) -> list[Any]:
    """Send ``values`` as one sequence, a sync request at a time; the outputs in order."""
    c = client(protocol, url)
    try:
        return [
            infer_one(
                c,
                protocol,
                model,
                v,
                sequence_id=sequence_id,
                sequence_start=i == 0,
                sequence_end=i == len(values) - 1,
                **kw,
            )
            for i, v in enumerate(values)
        ]
    finally:
        c.close()


def run_stream(
    url: str, sequences: list[tuple[str, int | str, list[int]]]
) -> dict[int | str, list[int]]:
    """Send every ``(model, sequence_id, values)`` on one gRPC stream, sequence after sequence
    without waiting; the outputs of each sequence id, in request order."""
    answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
    expected = sum(len(values) for _, _, values in sequences)
    results: dict[int | str, list[tuple[int, int]]] = {sid: [] for _, sid, _ in sequences}
    with tg.InferenceServerClient(url) as c:
        c.start_stream(callback=lambda result, error: answers.put((result, error)))
        for model, sid, values in sequences:
            for i, v in enumerate(values):
                data = np.full([1, 1], v, dtype=np.int32)
                inp = tg.InferInput("INPUT", [1, 1], "INT32")
                inp.set_data_from_numpy(data)
                c.async_stream_infer(
                    model,
                    [inp],
                    request_id=f"{sid}_{i}",
                    sequence_id=sid,
                    sequence_start=i == 0,
                    sequence_end=i == len(values) - 1,
                )
        for _ in range(expected):
            result, error = answers.get(timeout=60)
            if error is not None:
                raise error
            rid = result.get_response().id
            sid_text, index = rid.rsplit("_", 1)
            key = next(k for k in results if str(k) == sid_text)
            results[key].append((int(index), int(result.as_numpy("OUTPUT").ravel()[0])))
        c.stop_stream()
    return {k: [v for _, v in sorted(pairs)] for k, pairs in results.items()}


def probe(
    protocol: str,
    url: str,
    model: str,
    sequence_id: int | str,
    *,
    start: bool = False,
    end: bool = False,
    batched: bool = False,
) -> dict[str, Any]:
    """What a probe model received (its JSON answer) for one request of a sequence."""
    c = client(protocol, url)
    try:
        text = infer_one(
            c,
            protocol,
            model,
            1,
            batched=batched,
            sequence_id=sequence_id,
            sequence_start=start,
            sequence_end=end,
        )
    finally:
        c.close()
    return dict(json.loads(text))


def model_config(protocol: str, url: str, model: str, version: str = "") -> dict[str, Any]:
    """``GET .../config`` (HTTP) or ModelConfig (gRPC, as JSON with Triton's field names)."""
    c = client(protocol, url)
    try:
        if protocol == "http":
            return dict(c.get_model_config(model, version))
        answer = c.get_model_config(model, version)
        return dict(
            json_format.MessageToDict(
                answer.config,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            )
        )
    finally:
        c.close()


#: The config fields clients read, compared between nbinfer and Triton.
CLIENT_FIELDS = (
    "name",
    "platform",
    "backend",
    "max_batch_size",
    "version_policy",
    "input",
    "output",
    "instance_group",
    "dynamic_batching",
    "sequence_batching",
    "default_model_filename",
)


def client_view(config: dict[str, Any]) -> dict[str, Any]:
    """The fields of a config clients read, with the encodings of both transports made equal
    (gRPC JSON spells int64 as strings; nbinfer's own extras in ``parameters`` dropped)."""
    view = {k: config.get(k) for k in CLIENT_FIELDS}
    dyn = view.get("dynamic_batching")
    if isinstance(dyn, dict):  # nbinfer echoes its effective queue policy too
        view["dynamic_batching"] = {k: v for k, v in dyn.items() if k != "default_queue_policy"}
    for group in view.get("instance_group") or []:
        group.pop("rate_limiter", None)
    params = config.get("parameters") or {}
    view["parameters"] = {
        k: v for k, v in params.items() if k != "device" and not k.startswith("nbinfer.")
    }
    return _ints(view)


def _ints(value: Any) -> Any:
    """Digit strings (proto3 JSON int64) as ints, recursively."""
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


# -- the calls grpc_explicit_*_content / *_model_control make, answered with an error ---------


def _simple_request(version: str = "") -> Any:
    """A ModelInferRequest for ``simple`` with both inputs in typed ``int_contents``."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="simple", model_version=version)
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        tensor.contents.int_contents[:] = list(range(16))
    return request


def stub_error(url: str, request: Any) -> tuple[str, str]:
    """Send ``request`` with the generated stub (as the explicit examples do): code, details."""
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    with grpc.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            stub.ModelInfer(request)
        except grpc.RpcError as exc:
            return exc.code().name, str(exc.details())
    raise AssertionError("the request was answered")


def mixed_contents_request() -> Any:
    """``simple`` with INPUT0 half in raw_input_contents, half in typed contents."""
    request = _simple_request()
    request.raw_input_contents.append(np.arange(8, dtype=np.int32).tobytes())
    request.inputs[0].contents.int_contents[:] = list(range(8, 16))
    return request


def versioned_request(version: str) -> Any:
    """A well-formed ``simple`` request naming ``version``."""
    return _simple_request(version)


def control_error(protocol: str, url: str, call: str, *args: Any, **kw: Any) -> str:
    """The message of the error a model-control / readiness call of tritonclient raises."""
    c = client(protocol, url)
    try:
        getattr(c, call)(*args, **kw)
    except InferenceServerException as exc:
        return str(exc.message())
    finally:
        c.close()
    raise AssertionError(f"{call}{args} did not fail")


def is_ready(protocol: str, url: str, model: str, version: str = "") -> bool:
    """tritonclient's ``is_model_ready``."""
    c = client(protocol, url)
    try:
        return bool(c.is_model_ready(model, version))
    finally:
        c.close()


# -- sequences sharing executions (direct / oldest sequence batching) ------------------------


def _seen_sequence(url: str, model: str, sequence_id: int, values: list[int]) -> list[Any]:
    """One sequence of a ``batch_*`` model: per request, ``(OUTPUT, SEEN)``."""
    answers = []
    with tg.InferenceServerClient(url) as c:
        for i, v in enumerate(values):
            inp = tg.InferInput("INPUT", [1, 1], "INT32")
            inp.set_data_from_numpy(np.full([1, 1], v, dtype=np.int32))
            wanted = [tg.InferRequestedOutput("OUTPUT"), tg.InferRequestedOutput("SEEN")]
            result = c.infer(
                model,
                [inp],
                outputs=wanted,
                sequence_id=sequence_id,
                sequence_start=i == 0,
                sequence_end=i == len(values) - 1,
            )
            seen = [int(x) for x in result.as_numpy("SEEN").ravel()]
            answers.append((int(result.as_numpy("OUTPUT").ravel()[0]), seen))
    return answers


def run_concurrent_sequences(
    url: str, model: str, sequences: int, values: list[int]
) -> tuple[list[list[int]], list[list[list[int]]], dict[str, Any]]:
    """``sequences`` sequences (ids 7000, 7001, ...) of ``values`` at once over gRPC (a thread
    and client each): the outputs of each, what each request's ``execute()`` looked like
    (``[requests in it, the request's correlation id]``), and the model's statistics."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(sequences) as pool:
        runs = [
            pool.submit(_seen_sequence, url, model, 7000 + i, [v + i for v in values])
            for i in range(sequences)
        ]
        answers = [run.result(timeout=120) for run in runs]
    stats = _settled_statistics(url, model, sequences * len(values))
    outputs = [[out for out, _ in answer] for answer in answers]
    seen = [[s for _, s in answer] for answer in answers]
    return outputs, seen, dict(stats["model_stats"][0])


def _settled_statistics(url: str, model: str, requests: int) -> dict[str, Any]:
    """The model's statistics once they count ``requests`` inferences (or after 10 s).

    Triton records an execution's statistics after its responses are sent, so a read right
    after the last answer can miss the last execution (CI once saw 11 of 12)."""
    deadline = time.monotonic() + 10
    c = tg.InferenceServerClient(url)
    try:
        while True:
            stats = c.get_inference_statistics(model, as_json=True)
            counted = int(stats["model_stats"][0].get("inference_count", 0))
            if counted >= requests or time.monotonic() > deadline:
                return stats
            time.sleep(0.02)
    finally:
        c.close()


def batch_sizes(stats: dict[str, Any]) -> dict[int, int]:
    """Executions per batch size in a model's statistics (``batch_stats``)."""
    return {
        int(entry["batch_size"]): int(entry["compute_infer"].get("count", 0))
        for entry in stats.get("batch_stats", [])
    }
