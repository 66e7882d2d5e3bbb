"""ClientConfig.from_rest_config accepts what KServe's RESTConfig accepts."""

from __future__ import annotations

import importlib.util
import ssl
import subprocess
import sys
from types import SimpleNamespace

import httpx
import pytest

from nbinfer.config import BasicAuth, BearerAuth, ClientConfig, HeaderAuth
from nbinfer.errors import InvalidInputError


def test_seconds_none_tuple_and_httpx_timeout() -> None:
    assert ClientConfig.from_rest_config({"timeout": 7}).timeouts.total == 7.0
    none = ClientConfig.from_rest_config({"timeout": None}).timeouts
    assert (none.connect, none.total) == (None, None)
    pair = ClientConfig.from_rest_config({"timeout": (3, 11, 11, 5)}).timeouts
    assert (pair.connect, pair.total) == (3.0, 11.0)
    hx = ClientConfig.from_rest_config({"timeout": httpx.Timeout(20.0, connect=2.5)}).timeouts
    assert (hx.connect, hx.total) == (2.5, 20.0)
    unlimited = ClientConfig.from_rest_config({"timeout": httpx.Timeout(None)}).timeouts
    assert unlimited.total is None


def test_verify_bool_path_and_ssl_context() -> None:
    assert ClientConfig.from_rest_config({"verify": False}).tls.verify is False  # type: ignore[union-attr]
    path = ClientConfig.from_rest_config({"verify": "/etc/ca.pem"}).tls
    assert path is not None and path.verify and path.ca_file == "/etc/ca.pem"
    context = ssl.create_default_context()
    assert ClientConfig.from_rest_config({"verify": context}).tls.verify is True  # type: ignore[union-attr]
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    assert ClientConfig.from_rest_config({"verify": context}).tls.verify is False  # type: ignore[union-attr]


def test_cert_path_and_tuples() -> None:
    one = ClientConfig.from_rest_config({"cert": "c.pem"}).tls
    assert one is not None and (one.cert_file, one.key_file) == ("c.pem", None)
    both = ClientConfig.from_rest_config({"cert": ("c.pem", "k.pem", "secret")}).tls
    assert both is not None and (both.cert_file, both.key_file) == ("c.pem", "k.pem")


def test_auth_forms() -> None:
    assert ClientConfig.from_rest_config({"auth": ("u", "p")}).auth == BasicAuth("u", "p")
    assert ClientConfig.from_rest_config({"auth": "tok"}).auth == BearerAuth("tok")
    basic = ClientConfig.from_rest_config({"auth": httpx.BasicAuth("u", "p")}).auth
    assert isinstance(basic, HeaderAuth)
    assert basic.headers() == BasicAuth("u", "p").headers()


def test_object_fields_retries_and_http2() -> None:
    cfg = ClientConfig.from_rest_config(SimpleNamespace(retries=0, http2=True, timeout=5))
    assert (cfg.retries.attempts, cfg.http2, cfg.timeouts.total) == (1, True, 5.0)


@pytest.mark.parametrize(
    ("field", "value"), [("timeout", "soon"), ("verify", 3), ("cert", {"c": 1})]
)
def test_values_restconfig_refuses_name_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidInputError, match=f"RESTConfig.{field}"):
        ClientConfig.from_rest_config({field: value})


@pytest.mark.skipif(importlib.util.find_spec("kserve") is None, reason="KServe SDK not installed")
def test_kserves_own_restconfig_is_understood() -> None:
    # in a subprocess: KServe's protobuf module clashes with tritonclient's in one process
    code = (
        "import httpx\n"
        "from kserve.inference_client import RESTConfig\n"
        "from nbinfer.config import ClientConfig\n"
        "c = ClientConfig.from_rest_config(RESTConfig(protocol='v2', retries=1, http2=True,\n"
        "    timeout=httpx.Timeout(9.0, connect=1.0), verify=False, auth=('u', 'p')))\n"
        "print(c.retries.attempts, c.http2, c.timeouts.connect, c.timeouts.total,"
        " c.tls.verify, c.auth.username)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", "True", "1.0", "9.0", "False", "u"]
