"""The ModelServer options KServe users look for: grace period, access log, exception handlers,
the OpenAPI document and the /docs page (issue 10 item 4), on real servers on 127.0.0.1.

The custom exception types and handlers live in a module written to a temp dir that both this
process (to pass objects) and the server (to import them by reference) can import.
"""

from __future__ import annotations

import html
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from nbinfer import Client
from nbinfer.errors import (
    InferenceError,
    InvalidInputError,
    RemoteInvalidInputError,
    ServerError,
    ServerUnavailableError,
)
from nbinfer.server.exception_handlers import ExceptionHandlers, reference
from nbinfer.server.launcher import LocalServer
from nbinfer.server.rest import ROUTES

_ERRORS_MODULE = "nbinfer_srvopts_errors"

_ERRORS = '''
class Teapot(Exception):
    """A business error the model raises."""


class Busy(Exception):
    """Another one, mapped by reference strings."""


def teapot(exc):
    return 422, f"teapot: {exc}"


def busy(exc):
    return 503, f"busy: {exc}"


def broken(exc):
    raise RuntimeError("the handler itself fails")
'''

_RAISER = f"""
from {_ERRORS_MODULE} import Busy, Teapot
from nbinfer.server.model import Model


class Raiser(Model):
    name = "raiser"
    inputs = [("X", "INT32", [-1])]
    outputs = [("Y", "INT32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        kind = int(inputs["X"][0])
        if kind == 1:
            raise Teapot("the pot is empty")
        if kind == 2:
            raise Busy("come back later")
        if kind == 3:
            raise RuntimeError("outer") from Teapot("inner")
        raise ValueError("nobody maps me")
"""

_SLOW = """
import os
import time
from nbinfer.server.model import Model


class Slow(Model):
    name = "slow"
    inputs = [("X", "FP32", [-1])]
    outputs = [("Y", "FP32", [-1])]

    def predict(self, inputs, context):
        begun = os.environ.get("SLOW_BEGUN_FILE")
        if begun:  # one line per request begun: a test waits for it, not for a guessed time
            with open(begun, "a") as out:
                out.write("begun\\n")
        time.sleep(float(inputs["X"][0]))  # ignores cancellation: a stuck model
        return {"Y": inputs["X"]}
"""


@pytest.fixture(scope="module")
def errors_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user's error module, importable here and (through PYTHONPATH) in the server."""
    where = tmp_path_factory.mktemp("user_code")
    (where / f"{_ERRORS_MODULE}.py").write_text(textwrap.dedent(_ERRORS))
    sys.path.insert(0, str(where))
    try:
        yield where
    finally:
        sys.path.remove(str(where))


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    for name, source in (("raiser", _RAISER), ("slow", _SLOW)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(textwrap.dedent(source))
    return repo


def _env(errors_dir: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(errors_dir), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


@pytest.fixture(scope="module")
def server(errors_dir: Path, repository: Path) -> Iterator[LocalServer]:
    """Access log on, handlers for Teapot (objects) and Busy (reference strings)."""
    import nbinfer_srvopts_errors as user  # type: ignore[import-not-found]

    srv = LocalServer(
        model_repository=repository,
        demo=True,
        device="cpu",
        env=_env(errors_dir),
        access_log=True,
        exception_handlers={
            user.Teapot: user.teapot,
            f"{_ERRORS_MODULE}:Busy": f"{_ERRORS_MODULE}:busy",
        },
        auth_token=None,
    ).start()
    try:
        yield srv
    finally:
        srv.stop()


def _wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# -- access log -------------------------------------------------------------------------------


def test_access_log_writes_one_line_per_request_with_method_path_status_latency_and_id(
    server: LocalServer,
) -> None:
    with httpx.Client(base_url=server.http_url) as http:
        assert http.get("/v2/health/ready", headers={"x-request-id": "req-42"}).status_code == 200
        assert http.get("/v2/models/nothing_here").status_code == 404
    line = re.compile(
        r'nbinfer\.access: 127\.0\.0\.1 "GET /v2/health/ready HTTP/1\.1" 200 \d+ '
        r"\d+\.\d{3} ms request_id=req-42$"
    )
    assert _wait_for(lambda: any(line.search(x) for x in server.logs().splitlines())), server.logs(
        tail=10
    )
    missing = '"GET /v2/models/nothing_here HTTP/1.1" 404'
    assert _wait_for(lambda: missing in server.logs()), server.logs(
        tail=10
    )  # log lines arrive async


def test_access_log_writes_one_line_per_grpc_call_with_peer_method_code_latency_and_id(
    server: LocalServer,
) -> None:
    import tritonclient.grpc as tg
    from tritonclient.utils import InferenceServerException

    client = tg.InferenceServerClient(server.grpc_address)
    try:
        x = tg.InferInput("INPUT0", [1, 16], "FP32")
        x.set_data_from_numpy(np.ones((1, 16), np.float32))
        y = tg.InferInput("INPUT1", [1, 16], "FP32")
        y.set_data_from_numpy(np.ones((1, 16), np.float32))
        client.infer("add_sub", [x, y], headers={"x-request-id": "grpc-7"})
        with pytest.raises(InferenceServerException, match="nothing_here"):
            client.get_model_metadata("nothing_here", headers={"x-request-id": "grpc-8"})
    finally:
        client.close()
    ok = re.compile(
        r'nbinfer\.access: ipv4:127\.0\.0\.1:\d+ "/inference\.GRPCInferenceService/ModelInfer" '
        r"OK \d+\.\d{3} ms request_id=grpc-7$"
    )
    missing = re.compile(
        r'"/inference\.GRPCInferenceService/ModelMetadata" NOT_FOUND \d+\.\d{3} ms '
        r"request_id=grpc-8$"
    )

    def logged(line: re.Pattern[str]) -> bool:
        return any(line.search(x) for x in server.logs().splitlines())

    assert _wait_for(lambda: logged(ok) and logged(missing)), server.logs(tail=10)  # async
    assert sum("request_id=grpc-7" in x for x in server.logs().splitlines()) == 1


def test_access_log_is_off_by_default(repository: Path) -> None:
    import tritonclient.grpc as tg

    with LocalServer(model_repository=repository, demo=False, device="cpu", auth_token=None) as srv:
        with httpx.Client(base_url=srv.http_url) as http:
            for _ in range(3):
                assert http.get("/v2/health/ready").status_code == 200
        client = tg.InferenceServerClient(srv.grpc_address)
        try:
            for _ in range(3):
                assert client.is_server_ready()
        finally:
            client.close()
        time.sleep(0.3)
        assert "nbinfer.access" not in srv.logs()
        assert "/v2/health/ready" not in srv.logs()
        assert "GRPCInferenceService" not in srv.logs()


def test_access_log_format_takes_gunicorn_atoms_and_refuses_unknown_ones(
    repository: Path,
) -> None:
    fmt = "%(m)s %(U)s -> %(s)s in %(D)s us ua=%({user-agent}i)s"
    with LocalServer(
        model_repository=repository,
        demo=False,
        access_log=True,
        access_log_format=fmt,
        auth_token=None,
    ) as srv:
        with httpx.Client(base_url=srv.http_url, headers={"user-agent": "probe/1"}) as http:
            http.get("/v2/health/live")
        pattern = re.compile(r"GET /v2/health/live -> 200 in \d+ us ua=probe/1$")
        assert _wait_for(lambda: any(pattern.search(x) for x in srv.logs().splitlines()))
    with pytest.raises(InvalidInputError, match="unknown_atom"):
        LocalServer(access_log=True, access_log_format="%(unknown_atom)s").command()


# -- exception handlers -----------------------------------------------------------------------


def _x(kind: int) -> dict[str, np.ndarray]:
    return {"X": np.array([kind], np.int32)}


def test_custom_handler_maps_a_model_exception_to_its_status_over_http(
    server: LocalServer,
) -> None:
    body = {"inputs": [{"name": "X", "shape": [1], "datatype": "INT32", "data": [1]}]}
    with httpx.Client(base_url=server.http_url) as http:
        r = http.post("/v2/models/raiser/infer", json=body)
        assert r.status_code == 422
        assert r.json() == {"error": "teapot: the pot is empty"}
        body["inputs"][0]["data"] = [2]
        r = http.post("/v2/models/raiser/infer", json=body)
        assert (r.status_code, r.json()["error"]) == (503, "busy: come back later")
        r = http.post("/v1/models/raiser:predict", json={"instances": [1]})
        assert (r.status_code, r.json()["error"]) == (422, "teapot: the pot is empty")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_custom_handler_answers_the_same_on_http_and_grpc(
    server: LocalServer, protocol: str
) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    with Client(url, protocol=protocol, retries=0) as client:
        with pytest.raises(RemoteInvalidInputError) as teapot:
            client.infer("raiser", _x(1))
        assert teapot.value.message == "teapot: the pot is empty"
        assert teapot.value.model_traceback is None
        with pytest.raises(ServerUnavailableError, match="busy: come back later") as busy:
            client.infer("raiser", _x(2))
        assert busy.value.status == 503
        # matched along the raised exception's causes
        with pytest.raises(RemoteInvalidInputError, match="teapot: inner"):
            client.infer("raiser", _x(3))
        # an exception without a handler keeps the default answer: 500 with the traceback
        with pytest.raises(InferenceError, match="nobody maps me") as default:
            client.infer("raiser", _x(4))
        assert default.value.status == 500
        assert default.value.model_traceback
    if protocol == "grpc":
        assert teapot.value.context.get("grpc_code") == "INVALID_ARGUMENT"
        assert busy.value.context.get("grpc_code") == "UNAVAILABLE"


def test_a_failing_handler_leaves_the_default_answer(errors_dir: Path) -> None:
    import nbinfer_srvopts_errors as user  # importable through errors_dir (not an earlier test)

    handlers = ExceptionHandlers({user.Teapot: user.broken})
    assert handlers.map(user.Teapot("x"), model="m", request_id="") is None
    mapped = ExceptionHandlers({user.Teapot: user.teapot}).map(
        user.Teapot("x"), model="m", request_id="r1"
    )
    assert isinstance(mapped, ServerError)
    assert (mapped.status, mapped.message, mapped.request_id) == (422, "teapot: x", "r1")


def test_handlers_travel_by_reference_and_unimportable_ones_are_refused(
    errors_dir: Path,
) -> None:
    import nbinfer_srvopts_errors as user

    assert reference(user.Teapot) == f"{_ERRORS_MODULE}:Teapot"
    assert ExceptionHandlers.options({user.Busy: f"{_ERRORS_MODULE}:busy"}) == [
        f"{_ERRORS_MODULE}:Busy={_ERRORS_MODULE}:busy"
    ]
    with pytest.raises(InvalidInputError, match="by reference"):
        LocalServer(exception_handlers={user.Teapot: lambda exc: (400, "x")}).command()
    with pytest.raises(InvalidInputError, match="cannot import"):
        LocalServer(exception_handlers={user.Teapot: f"{_ERRORS_MODULE}:nope"}).command()
    with pytest.raises(InvalidInputError, match="not an exception class"):
        ExceptionHandlers({f"{_ERRORS_MODULE}:teapot": user.teapot})


def test_a_handler_the_server_cannot_import_stops_the_start_with_the_reason(
    repository: Path,
) -> None:
    srv = LocalServer(
        model_repository=repository,
        demo=False,
        extra_args=["--exception-handler", "no_such_module:Err=no_such_module:handle"],
        auth_token=None,
    )
    with pytest.raises(Exception, match="no_such_module"):
        srv.start()
    srv.stop()


# -- grace period -----------------------------------------------------------------------------


class _InFlight(threading.Thread):
    def __init__(self, client: Client, seconds: float) -> None:
        super().__init__(daemon=True)
        self.client, self.seconds = client, seconds
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.client.infer("slow", {"X": np.array([self.seconds], np.float32)})
        except BaseException as exc:
            self.error = exc


def test_stop_honours_the_grace_period_finishing_quick_requests_and_naming_stuck_ones(
    repository: Path, tmp_path: Path
) -> None:
    grace = 2.0
    begun = tmp_path / "begun"
    srv = LocalServer(
        model_repository=repository,
        demo=False,
        device="cpu",
        grace_period=grace,
        auth_token=None,
        env={"SLOW_BEGUN_FILE": str(begun)},
    )
    srv.start()

    def running(n: int) -> bool:
        return begun.exists() and len(begun.read_text().splitlines()) >= n

    with Client(srv.http_url, retries=0) as stuck_client, Client(srv.http_url) as quick_client:
        stuck = _InFlight(stuck_client, 60.0)
        assert _wait_for(lambda: running(1), timeout=30), "the stuck request never began"
        quick = _InFlight(quick_client, 0.8)
        assert _wait_for(lambda: running(2), timeout=30), "the quick request never began"
        start = time.monotonic()
        srv.stop()
        elapsed = time.monotonic() - start
        quick.join(10)
        stuck.join(10)
    print(f"\nstop with a {grace} s grace period and a stuck model: {elapsed:.1f} s")
    assert grace - 0.2 <= elapsed < grace + 4.0, elapsed
    assert quick.error is None, quick.error
    assert quick.result.as_numpy("Y").tolist() == pytest.approx([0.8])
    assert stuck.error is not None
    assert any("slow (1)" in line for line in srv.abandoned), srv.abandoned
    assert any("2 s grace period" in line for line in srv.abandoned), srv.abandoned


def test_a_negative_grace_period_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="grace_period"):
        LocalServer(grace_period=-1).command()


# -- OpenAPI and /docs ------------------------------------------------------------------------


def _openapi(server: LocalServer) -> dict[str, Any]:
    with httpx.Client(base_url=server.http_url) as http:
        r = http.get("/v2/openapi.json")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    document: dict[str, Any] = r.json()
    return document


def test_openapi_lists_every_route_the_rest_adapter_serves(server: LocalServer) -> None:
    document = _openapi(server)
    served = {(r.template, m.lower()) for r in ROUTES for m in r.methods}
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert documented == served
    for path in ("/v2/models/{model}/infer", "/v2/health/live", "/v2/repository/index"):
        assert path in document["paths"]
    with httpx.Client(base_url=server.http_url) as http:
        assert document["info"]["version"] == http.get("/v2").json()["version"]


def test_openapi_document_is_valid_openapi_3(server: LocalServer) -> None:
    document = _openapi(server)
    try:
        from openapi_spec_validator import validate
    except ImportError:  # not installed: the structural checks below
        validate = None
    if validate is not None:
        validate(document)
    assert document["openapi"].startswith("3.")
    assert {"title", "version"} <= set(document["info"])
    schemas = document["components"]["schemas"]
    operation_ids = []
    for path, item in document["paths"].items():
        names = re.findall(r"\{(\w+)\}", path)
        for method, op in item.items():
            assert method in {"get", "post"}
            operation_ids.append(op["operationId"])
            assert op["summary"] and op["tags"] and "200" in op["responses"]
            in_path = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
            assert in_path == names, (path, in_path)
            assert all(p["required"] for p in op.get("parameters", []) if p["in"] == "path")
            for ref in re.findall(
                r'"\$ref": "#/components/schemas/(\w+)"', str(op).replace("'", '"')
            ):
                assert ref in schemas, ref
    assert len(operation_ids) == len(set(operation_ids))


def test_docs_page_renders_every_route_without_network(server: LocalServer) -> None:
    with httpx.Client(base_url=server.http_url) as http:
        r = http.get("/docs")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    page = r.text
    for route in ROUTES:
        assert html.escape(route.template) in page, route.template
    assert "Run an inference" in page
    assert "<script" not in page and "src=" not in page and "https://" not in page


def test_docs_routes_sit_behind_the_token_like_the_rest(repository: Path) -> None:
    with (
        LocalServer(model_repository=repository, demo=False, auth_token="s3cret") as srv,
        httpx.Client(base_url=srv.http_url) as http,
    ):
        assert http.get("/docs").status_code == 401
        ok = http.get("/v2/openapi.json", headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200
