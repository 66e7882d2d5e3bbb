"""A web page in the user's browser cannot drive the server (issue 25, item 4).

The attacker is a page on ``http://evil.example``: it reaches the default server (``nbinfer
serve``: loopback, no token) through DNS rebinding (``Host: evil.example:PORT``, the page
"same-origin" in the browser's eyes) or with cross-site "simple" requests (a ``text/plain`` POST
needs no CORS preflight; the page cannot read the answer, but the server would already have
acted). Each request below carries the headers a browser sends for that case, sent over a real
socket to a real ``python -m nbinfer.server`` process; afterwards the models still answer right.
curl, tritonclient and nbinfer's clients keep working unchanged.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

import nbinfer
from nbinfer.errors import InvalidInputError
from nbinfer.server.demo.nets import iris_predict, load_weights
from nbinfer.server.launcher import LocalServer, parse_ready_line
from nbinfer.server.rest import ROUTES
from nbinfer.server.webguard import WebGuard

EVIL = "http://evil.example"
#: What a browser adds to a cross-site fetch(..., {method: "POST", mode: "no-cors", body: "..."}).
CROSS_SITE = {
    "Origin": EVIL,
    "Content-Type": "text/plain;charset=UTF-8",
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "no-cors",
    "Sec-Fetch-Dest": "empty",
}
IRIS_X = [[5.1, 3.5, 1.4, 0.2]]


@dataclass
class Served:
    http: int
    grpc: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}"


@contextlib.contextmanager
def serve(*flags: str) -> Iterator[Served]:
    """``python -m nbinfer.server --demo`` as ``nbinfer serve`` runs it: loopback, no token."""
    env = {k: v for k, v in os.environ.items() if k != "NBINFER_AUTH_TOKEN"}
    cmd = [sys.executable, "-m", "nbinfer.server", "--demo", "--device", "cpu"]
    cmd += ["--http-port", "0", "--grpc-port", "0", "--parent-pid", str(os.getpid()), *flags]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
    )
    try:
        assert proc.stdout is not None
        urls = None
        lines = []
        for raw in iter(proc.stdout.readline, b""):
            lines.append(raw.decode(errors="replace"))
            urls = parse_ready_line(lines[-1])
            if urls is not None:
                break
        assert urls is not None, "".join(lines)
        yield Served(int(urls[0].rpartition(":")[2]), int(urls[1].rpartition(":")[2]))
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve() as srv:
        yield srv


def request(
    port: int,
    method: str,
    path: str,
    *,
    host: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request with exactly the ``Host`` and headers given; (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            method,
            path,
            body=body,
            headers={"Host": host or f"127.0.0.1:{port}", **(headers or {})},
        )
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _iris_body() -> bytes:
    inp = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": IRIS_X[0]}
    return json.dumps({"inputs": [inp]}).encode()


def assert_models_answer_right(srv: Served) -> None:
    """iris and add_sub are loaded and give the right numbers (nbinfer.Client over HTTP)."""
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 3.0, dtype=np.float32)
    with nbinfer.Client(srv.url) as client:
        out = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})
        np.testing.assert_array_equal(out.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(out.as_numpy("OUTPUT1"), a - b)
        probs = client.infer("iris", {"input": np.array(IRIS_X, dtype=np.float32)})
        want = iris_predict(load_weights("iris"), np.array(IRIS_X, dtype=np.float32))
        np.testing.assert_allclose(probs.as_numpy("probabilities"), want, rtol=1e-5)


def _swapped_add_sub_onnx() -> bytes:
    """An ONNX ``add_sub`` that gives wrong answers (OUTPUT0 = a - b, OUTPUT1 = a + b)."""
    onnx = pytest.importorskip("onnx")
    helper, tp = onnx.helper, onnx.TensorProto

    def io(name: str) -> object:
        return helper.make_tensor_value_info(name, tp.FLOAT, ["N", 16])

    graph = helper.make_graph(
        [
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "evil",
        [io("INPUT0"), io("INPUT1")],
        [io("OUTPUT0"), io("OUTPUT1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _refused(status: int, body: bytes, *words: str) -> None:
    assert status == 403, (status, body)
    message = json.loads(body)["error"]
    for word in words:
        assert word in message, message


# -- DNS rebinding: a foreign Host ----------------------------------------------------------


def test_dns_rebinding_cannot_infer_load_or_unload(server: Served) -> None:
    """Host evil.example:PORT (the page believes it is same-origin): 403 on each, no harm."""
    host = f"evil.example:{server.http}"
    same_origin = {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}
    status, _, body = request(
        server.http, "POST", "/v2/models/iris/infer", host=host, body=_iris_body()
    )
    _refused(status, body, repr(host), "--allowed-hosts evil.example")
    for path in ("/v2/repository/models/add_sub/load", "/v2/repository/models/iris/unload"):
        status, _, body = request(
            server.http, "POST", path, host=host, headers=same_origin, body=b"{}"
        )
        _refused(status, body, repr(host), "--allowed-hosts")
    status, _, body = request(server.http, "GET", "/v2/models/iris", host=host)
    _refused(status, body, "DNS rebinding")
    assert_models_answer_right(server)


def test_every_route_checks_the_host(server: Served) -> None:
    """Every route of the REST table (v2, v1, repository, shm, logging, metrics, docs...)."""
    host = "evil.example"
    for route in ROUTES:
        path = route.template.replace("{model}", "iris").replace("{version}", "1")
        path = path.replace("{region}", "r")
        for method in route.methods:
            status, headers, body = request(server.http, method, path, host=host, body=b"{}")
            _refused(status, body, "'evil.example'")
            assert not any(k.startswith("access-control-") for k in headers)
    # logging stayed as it was: the refused POSTs above never reached it
    status, _, body = request(server.http, "GET", "/v2/logging")
    assert status == 200, body
    assert_models_answer_right(server)


def test_loopback_hosts_any_port_and_no_host_pass(server: Served) -> None:
    for host in ("localhost", f"localhost:{server.http}", "127.0.0.1:1", f"[::1]:{server.http}"):
        status, _, body = request(server.http, "GET", "/v2/health/ready", host=host)
        assert status == 200, (host, body)
    # HTTP/1.0 without a Host header
    with socket.create_connection(("127.0.0.1", server.http), timeout=30) as sock:
        sock.sendall(b"GET /v2/health/ready HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply


# -- cross-site requests --------------------------------------------------------------------


def test_cross_site_text_plain_post_cannot_replace_add_sub_or_unload_iris(server: Served) -> None:
    """The reproduced attack: an upload replacing add_sub, then an unload of iris, no preflight."""
    upload = base64.b64encode(_swapped_add_sub_onnx()).decode()
    replace = json.dumps({"parameters": {"file:1/model.onnx": upload}})
    host = f"127.0.0.1:{server.http}"
    status, headers, body = request(
        server.http,
        "POST",
        "/v2/repository/models/add_sub/load",
        host=host,
        headers=CROSS_SITE,
        body=replace,
    )
    _refused(status, body, f"'{EVIL}'", f"--allowed-origins {EVIL}")
    assert "access-control-allow-origin" not in headers
    status, _, body = request(
        server.http,
        "POST",
        "/v2/repository/models/iris/unload",
        host=f"localhost:{server.http}",
        headers=CROSS_SITE,
        body="{}",
    )
    _refused(status, body, f"'{EVIL}'")
    status, _, body = request(
        server.http, "POST", "/v2/logging", headers=CROSS_SITE, body='{"log_info": false}'
    )
    _refused(status, body, EVIL)
    assert_models_answer_right(server)


def test_sec_fetch_site_without_origin_is_refused(server: Served) -> None:
    """A no-cors GET (an <img> or <script> tag) sends no Origin, only Sec-Fetch-Site."""
    for site in ("cross-site", "same-site", "Cross-Site"):
        status, _, body = request(server.http, "GET", "/metrics", headers={"Sec-Fetch-Site": site})
        _refused(status, body, site, "Sec-Fetch-Site")
    status, _, body = request(
        server.http,
        "POST",
        "/v2/repository/models/iris/unload",
        headers={"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
        body="{}",
    )
    _refused(status, body, "cross-site")
    for site in ("same-origin", "none"):  # the server's own page; a typed URL or bookmark
        status, _, body = request(server.http, "GET", "/metrics", headers={"Sec-Fetch-Site": site})
        assert status == 200, (site, body)
    assert_models_answer_right(server)


def test_same_origin_passes_but_another_localhost_port_does_not(server: Served) -> None:
    host = f"localhost:{server.http}"
    own = {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}
    status, headers, body = request(
        server.http, "POST", "/v2/models/iris/infer", host=host, headers=own, body=_iris_body()
    )
    assert status == 200, body
    assert "access-control-allow-origin" not in headers  # same-origin needs no CORS
    # JupyterLab's page on another port of localhost is same-site, not same-origin
    lab = {"Origin": "http://localhost:8888", "Sec-Fetch-Site": "same-site"}
    status, _, body = request(
        server.http, "POST", "/v2/models/iris/infer", host=host, headers=lab, body=_iris_body()
    )
    _refused(status, body, "'http://localhost:8888'")
    for origin in ("null", f"http://{host}.evil.example", f"http://127.0.0.1:{server.http}"):
        status, _, body = request(server.http, "GET", "/v2", host=host, headers={"Origin": origin})
        _refused(status, body, repr(origin))
    # a same-origin Origin contradicted by Sec-Fetch-Site is refused too
    status, _, body = request(
        server.http, "GET", "/v2", host=host, headers={**own, "Sec-Fetch-Site": "cross-site"}
    )
    _refused(status, body, "cross-origin")


def test_no_cors_preflight_answer_without_allowed_origins(server: Served) -> None:
    preflight = {
        "Origin": EVIL,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
        "Sec-Fetch-Site": "cross-site",
    }
    status, headers, body = request(
        server.http, "OPTIONS", "/v2/repository/models/iris/unload", headers=preflight
    )
    _refused(status, body, EVIL)
    assert not any(k.startswith("access-control-") for k in headers)


# -- the clients users run ------------------------------------------------------------------


def test_readme_curl_as_written(server: Served) -> None:
    """README: ``curl -s localhost:8000/v2/models/iris/infer -d '...'`` (form content type)."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    data = '{"inputs":[{"name":"input","datatype":"FP32","shape":[1,4],"data":[5.1,3.5,1.4,0.2]}]}'
    out = subprocess.run(
        [curl, "-s", f"localhost:{server.http}/v2/models/iris/infer", "-d", data],
        capture_output=True,
        check=True,
        timeout=60,
    )
    answer = json.loads(out.stdout)
    want = iris_predict(load_weights("iris"), np.array(IRIS_X, dtype=np.float32))
    np.testing.assert_allclose(answer["outputs"][0]["data"], want.ravel(), rtol=1e-5)


def test_tritonclient_and_nbinfer_clients_work(server: Served) -> None:
    import tritonclient.grpc as tg
    import tritonclient.http as th

    x = np.array(IRIS_X, dtype=np.float32)
    want = iris_predict(load_weights("iris"), x)
    for url in (f"127.0.0.1:{server.http}", f"localhost:{server.http}"):
        client = th.InferenceServerClient(url)
        inp = th.InferInput("input", [1, 4], "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        got = client.infer("iris", [inp]).as_numpy("probabilities")
        np.testing.assert_allclose(got, want, rtol=1e-5)
        client.close()
    gclient = tg.InferenceServerClient(f"localhost:{server.grpc}")
    ginp = tg.InferInput("input", [1, 4], "FP32")
    ginp.set_data_from_numpy(x)
    np.testing.assert_allclose(
        gclient.infer("iris", [ginp]).as_numpy("probabilities"), want, rtol=1e-5
    )
    gclient.close()
    for url in (f"http://localhost:{server.http}", f"grpc://127.0.0.1:{server.grpc}"):
        with nbinfer.Client(url) as client:
            got = client.infer("iris", {"input": x}).as_numpy("probabilities")
            np.testing.assert_allclose(got, want, rtol=1e-5)


def test_grpc_port_does_not_speak_to_browsers(server: Served) -> None:
    """Browsers send HTTP/1.1 to a cleartext port (no h2c): gRPC core answers no HTTP at all."""
    with socket.create_connection(("127.0.0.1", server.grpc), timeout=30) as sock:
        body = b'{"parameters": {}}'
        sock.sendall(
            b"POST /inference.GRPCInferenceService/RepositoryModelUnload HTTP/1.1\r\n"
            b"Host: evil.example\r\nOrigin: http://evil.example\r\n"
            b"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        reply = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                reply += chunk
    assert not reply.startswith(b"HTTP/"), reply
    assert_models_answer_right(server)


# -- what the operator configures -----------------------------------------------------------


def test_allowed_hosts_and_origins_with_cors() -> None:
    lab = "http://localhost:8888"
    with serve("--allowed-hosts", "models.internal,Other.LAN", "--allowed-origins", lab) as srv:
        for host in (f"models.internal:{srv.http}", "other.lan", "localhost"):
            status, _, body = request(srv.http, "GET", "/v2/health/ready", host=host)
            assert status == 200, (host, body)
        status, _, body = request(srv.http, "GET", "/v2", host="evil.example")
        _refused(status, body, "evil.example")
        # the allowed origin: answered, with CORS headers naming it (and only it)
        cors = {"Origin": lab, "Sec-Fetch-Site": "same-site"}
        status, headers, body = request(
            srv.http, "POST", "/v2/models/iris/infer", headers=cors, body=_iris_body()
        )
        assert status == 200, body
        assert headers["access-control-allow-origin"] == lab
        assert "Inference-Header-Content-Length" in headers["access-control-expose-headers"]
        assert "Origin" in headers["vary"]
        # its preflight: the route's methods, the headers it asked for
        status, headers, _ = request(
            srv.http,
            "OPTIONS",
            "/v2/repository/models/iris/unload",
            headers={
                "Origin": lab,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,authorization",
            },
        )
        assert status == 200
        assert headers["access-control-allow-origin"] == lab
        assert headers["access-control-allow-methods"] == "POST"
        assert headers["access-control-allow-headers"] == "content-type,authorization"
        # other origins stay refused, preflight included, and get no CORS headers
        for method in ("OPTIONS", "POST"):
            status, headers, body = request(
                srv.http,
                method,
                "/v2/repository/models/iris/unload",
                headers={**CROSS_SITE, "Access-Control-Request-Method": "POST"},
            )
            _refused(status, body, EVIL)
            assert "access-control-allow-origin" not in headers
        assert_models_answer_right(srv)


def test_star_allows_any_host_and_origin() -> None:
    with LocalServer(
        demo=True, device="cpu", allowed_hosts=["*"], allowed_origins=["*"], auth_token=None
    ) as srv:
        port = int(srv.http_url.rpartition(":")[2])
        status, headers, body = request(
            port,
            "POST",
            "/v2/models/iris/infer",
            host="anything.example:1",
            headers=CROSS_SITE,
            body=_iris_body(),
        )
        assert status == 200, body
        assert headers["access-control-allow-origin"] == EVIL


def test_bad_allowlist_entries_are_refused_before_start() -> None:
    with pytest.raises(InvalidInputError, match="localhost:8888"):
        LocalServer(allowed_origins=["localhost:8888"]).command()
    with pytest.raises(InvalidInputError, match="http://x"):
        LocalServer(allowed_hosts=["http://x"]).command()
    with pytest.raises(InvalidInputError, match="list of strings"):
        LocalServer(allowed_hosts="localhost")  # type: ignore[arg-type]
    out = subprocess.run(
        [sys.executable, "-m", "nbinfer.server", "--allowed-origins", "evil.example/x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "allowed origin 'evil.example/x' is not an origin" in out.stderr


# -- the guard itself -------------------------------------------------------------------------


def test_guard_hosts_by_bind_address() -> None:
    loop = WebGuard(bind_host="127.0.0.1")
    assert loop.host_allowed(b"LOCALHOST.:80")
    assert not loop.host_allowed(b"10.0.0.5:8000")
    assert not loop.host_allowed(b"localhost.evil.example")
    assert not loop.host_allowed(b"[::1")
    assert not loop.host_allowed(b"localhost:http")
    one = WebGuard(bind_host="10.0.0.5")
    assert one.host_allowed(b"10.0.0.5:8000")
    assert not one.host_allowed(b"10.0.0.6:8000")
    # a wildcard bind answers on every address: any IP literal (never a rebinding), no names
    anywhere = WebGuard(bind_host="0.0.0.0")
    assert anywhere.host_allowed(b"10.0.0.6:8000")
    assert anywhere.host_allowed(b"[fe80::1]:8000")
    assert not anywhere.host_allowed(b"evil.example:8000")
    named = WebGuard(bind_host="notebook-host")
    assert named.host_allowed(b"Notebook-Host:8000")


def test_with_a_token_preflights_need_none_and_a_foreign_host_stays_refused() -> None:
    """The screen runs before authentication: a preflight carries no token, a page has none."""
    lab = "http://localhost:8888"
    token = "browser-test-token"
    with LocalServer(demo=True, device="cpu", auth_token=token, allowed_origins=[lab]) as srv:
        port = int(srv.http_url.rpartition(":")[2])
        status, headers, _ = request(
            port,
            "OPTIONS",
            "/v2/models/iris/infer",
            headers={
                "Origin": lab,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert status == 200
        assert headers["access-control-allow-origin"] == lab
        status, headers, body = request(
            port, "POST", "/v2/models/iris/infer", headers={"Origin": lab}, body=_iris_body()
        )
        assert status == 401, body
        assert headers["access-control-allow-origin"] == lab  # the page can tell why
        auth = {"Authorization": f"Bearer {token}"}
        status, _, body = request(
            port,
            "POST",
            "/v2/models/iris/infer",
            headers={"Origin": lab, **auth},
            body=_iris_body(),
        )
        assert status == 200, body
        status, _, body = request(
            port, "POST", "/v2/models/iris/infer", host="evil.example", headers=auth, body=b"{}"
        )
        _refused(status, body, "evil.example")
