"""``Client(http_engine="httpx", httpx_client=...)`` end to end (issue 10, item 4).

KServe SDK users bring their own httpx client (transport, auth, hooks); nbinfer uses it as given,
never closes it, and keeps its own behaviour on top: results, health, metadata, error mapping,
retries. Against the embedded server on 127.0.0.1, with and without its token auth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterator

import httpx
import numpy as np
import pytest

import nbinfer
from nbinfer.compat.kserve import InferenceRESTClient, RESTConfig
from nbinfer.errors import (
    ConnectError,
    InvalidInputError,
    ModelNotFoundError,
    RequestTimeoutError,
    UnauthenticatedError,
)
from nbinfer.server.launcher import LocalServer
from nbinfer.transports.httpx_engine import AsyncHttpxEngine, HttpxEngine

TOKEN = "httpx-engine-test-token"
X = np.arange(4, dtype=np.float32).reshape(1, 4)
ONES = np.ones((1, 16), np.float32)


class _Bearer(httpx.Auth):
    """A custom httpx auth flow, the kind a KServe SDK user passes as ``RESTConfig.auth``."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.calls = 0

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self.calls += 1
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, auth_token=TOKEN).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_infer_over_httpx_equals_the_default_engine(server: LocalServer, binary: bool) -> None:
    with nbinfer.Client(server.http_url) as default:
        expected = default.infer("add_sub", {"INPUT0": ONES, "INPUT1": 2 * ONES}, binary=binary)
    with nbinfer.Client(server.http_url, http_engine="httpx") as client:
        assert isinstance(client._engine, HttpxEngine)
        result = client.infer("add_sub", {"INPUT0": ONES, "INPUT1": 2 * ONES}, binary=binary)
        for name in ("OUTPUT0", "OUTPUT1"):
            np.testing.assert_array_equal(result[name], expected[name])
        iris = client.infer("iris", {"input": X}, binary=binary)
        assert iris.output_names


def test_health_and_metadata_over_a_user_client(server: LocalServer) -> None:
    with httpx.Client() as user:
        client = nbinfer.Client(server.http_url, httpx_client=user)  # implies http_engine="httpx"
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("iris")
        assert client.get_server_metadata().name
        assert [t.name for t in client.get_model_metadata("add_sub").inputs] == ["INPUT0", "INPUT1"]
        client.close()
        assert not user.is_closed, "nbinfer closed the user's client"


def test_errors_map_onto_nbinfers_tree(server: LocalServer, closed_port: int) -> None:
    with nbinfer.Client(server.http_url, http_engine="httpx") as client:
        with pytest.raises(ModelNotFoundError, match="no_such_model"):
            client.infer("no_such_model", {"input": X})
        with pytest.raises(ModelNotFoundError):
            client.is_model_ready("no_such_model")
    with nbinfer.Client(f"http://127.0.0.1:{closed_port}", http_engine="httpx", retries=1) as dead:
        with pytest.raises(ConnectError) as info:
            dead.is_server_live()
        assert isinstance(info.value.__cause__, httpx.ConnectError)


def test_a_timeout_from_the_users_transport_is_timeout_error(server: LocalServer) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with httpx.Client(transport=httpx.MockTransport(slow)) as user:
        client = nbinfer.Client(server.http_url, httpx_client=user, retries=0)
        with pytest.raises(RequestTimeoutError) as info:
            client.get_server_metadata()
        assert isinstance(info.value.__cause__, httpx.ReadTimeout)


def test_connect_errors_are_retried_through_the_users_transport(server: LocalServer) -> None:
    attempts: list[str] = []
    real = httpx.HTTPTransport()

    def flaky(request: httpx.Request) -> httpx.Response:
        attempts.append(request.url.path)
        if len(attempts) < 3:
            raise httpx.ConnectError("not yet", request=request)
        return real.handle_request(request)

    with httpx.Client(transport=httpx.MockTransport(flaky)) as user, real:
        client = nbinfer.Client(server.http_url, httpx_client=user, retries=2)
        assert client.get_server_metadata().name
    assert attempts == ["/v2"] * 3


def test_a_user_client_with_its_own_auth_reaches_a_token_server(secured: LocalServer) -> None:
    # the control: a call without credentials is refused (nbinfer's own clients in this process
    # would be handed the token, so the anonymous caller is httpx itself)
    assert httpx.get(secured.http_url + "/v2").status_code == 401
    with httpx.Client() as bare, nbinfer.Client(secured.http_url, httpx_client=bare) as handed:
        assert handed.get_server_metadata().name  # no auth of its own: the server's token
    with (
        httpx.Client(headers={"Authorization": "Bearer wrong"}) as wrong,
        nbinfer.Client(secured.http_url, httpx_client=wrong) as refused,
        pytest.raises(UnauthenticatedError),
    ):
        refused.get_server_metadata()  # its own header wins over the server's token
    auth = _Bearer(TOKEN)
    with httpx.Client(auth=auth) as user:
        client = nbinfer.Client(secured.http_url, httpx_client=user)
        result = client.infer("add_sub", {"INPUT0": ONES, "INPUT1": ONES})
        np.testing.assert_array_equal(result["OUTPUT0"], 2 * ONES)
    assert auth.calls >= 2  # metadata (binary negotiation) and infer went through its flow


def test_nbinfer_auth_applies_over_a_user_client(secured: LocalServer) -> None:
    with httpx.Client() as user:
        client = nbinfer.Client(secured.http_url, httpx_client=user, auth=TOKEN)
        assert client.is_server_ready()
        assert client.get_server_metadata().name


def test_async_client_with_a_user_async_client_and_its_auth(secured: LocalServer) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(auth=_Bearer(TOKEN)) as user:
            client = nbinfer.AsyncClient(secured.http_url, httpx_client=user)
            assert isinstance(client._engine, AsyncHttpxEngine)
            assert await client.is_server_ready()
            result = await client.infer("add_sub", {"INPUT0": ONES, "INPUT1": ONES})
            np.testing.assert_array_equal(result["OUTPUT1"], 0 * ONES)
            await client.aclose()
            assert not user.is_closed

    asyncio.run(main())


def test_async_own_httpx_clients_serve_successive_loops(server: LocalServer) -> None:
    client = nbinfer.AsyncClient(server.http_url, http_engine="httpx")

    async def use() -> None:
        assert await client.is_server_live()
        assert (await client.infer("iris", {"input": X})).output_names

    for _ in range(3):
        asyncio.run(use())
    asyncio.run(client.aclose())


def test_engine_options_are_checked(server: LocalServer, grpc_url: str) -> None:
    with pytest.raises(InvalidInputError, match="http_engine"):
        nbinfer.Client(server.http_url, http_engine="requests")
    with pytest.raises(InvalidInputError, match="HTTP"):
        nbinfer.Client(grpc_url, http_engine="httpx")
    with httpx.Client() as user, pytest.raises(InvalidInputError, match="httpx_client"):
        nbinfer.Client(server.http_url, http_engine="pycurl", httpx_client=user)
    with httpx.Client() as user, pytest.raises(InvalidInputError, match=r"httpx\.AsyncClient"):
        nbinfer.AsyncClient(server.http_url, httpx_client=user)


def test_kserve_rest_config_transport_carries_the_calls(server: LocalServer) -> None:
    seen: list[str] = []

    class Counting(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path)
            return await super().handle_async_request(request)

    async def main() -> None:
        client = InferenceRESTClient(RESTConfig(protocol="v2", transport=Counting()))
        try:
            assert await client.is_server_ready(server.http_url)
            assert await client.is_model_ready(server.http_url, "iris")
        finally:
            await client.close()

    asyncio.run(main())
    assert seen == ["/v2/health/ready", "/v2/models/iris/ready"]


def test_kserve_rest_config_auth_flow_runs_in_the_httpx_client(secured: LocalServer) -> None:
    auth = _Bearer(TOKEN)

    async def main() -> None:
        client = InferenceRESTClient(RESTConfig(protocol="v2", auth=auth))
        try:
            assert await client.is_server_ready(secured.http_url)
        finally:
            await client.close()

    asyncio.run(main())
    assert auth.calls == 1
