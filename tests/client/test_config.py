"""Client configuration: precedence, KServe RESTConfig mapping, auth normalisation."""

from __future__ import annotations

import pytest

from nbinfer.client import Client
from nbinfer.config import (
    BasicAuth,
    BearerAuth,
    ClientConfig,
    HeaderAuth,
    Retries,
    Timeouts,
    TLSConfig,
    as_auth,
)
from nbinfer.errors import InvalidInputError


def test_explicit_arguments_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBINFER_TIMEOUT", "7")
    monkeypatch.setenv("NBINFER_RETRIES", "5")
    monkeypatch.setenv("NBINFER_TOKEN", "env-token")
    from_env = Client("h:1").config
    assert from_env.timeouts.total == 7.0
    assert from_env.retries.attempts == 5
    assert from_env.auth == BearerAuth("env-token")
    explicit = Client("h:1", timeout=3, retries=0, auth=("u", "p")).config
    assert explicit.timeouts.total == 3.0
    assert explicit.retries.attempts == 1
    assert explicit.auth == BasicAuth("u", "p")


def test_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TIMEOUT", "CONNECT_TIMEOUT", "RETRIES", "TOKEN", "BINARY", "HTTP2"):
        monkeypatch.delenv(f"NBINFER_{name}", raising=False)
    config = ClientConfig.from_env()
    assert config.timeouts == Timeouts()
    assert config.retries == Retries()
    assert config.auth is None
    assert config.binary is None


def test_from_kserve_rest_config_mapping() -> None:
    config = ClientConfig.from_rest_config(
        {
            "retries": 2,
            "http2": True,
            "timeout": 12,
            "verify": "/tmp/ca.pem",
            "cert": ("/tmp/c.pem", "/tmp/k.pem"),
            "auth": ("a", "b"),
            "verbose": True,
        }
    )
    assert config.retries.attempts == 3
    assert config.http2 is True
    assert config.timeouts.total == 12.0
    assert config.tls == TLSConfig(
        verify=True, ca_file="/tmp/ca.pem", cert_file="/tmp/c.pem", key_file="/tmp/k.pem"
    )
    assert config.auth == BasicAuth("a", "b")


def test_from_kserve_rest_config_object() -> None:
    class RESTConfig:
        retries = 0
        timeout = None
        verify = False
        auth = None

    config = ClientConfig.from_rest_config(RESTConfig())
    assert config.retries.attempts == 1
    assert config.timeouts.total is None
    assert config.tls is not None and config.tls.verify is False


def test_auth_headers() -> None:
    assert BasicAuth("user", "pw").headers() == {"authorization": "Basic dXNlcjpwdw=="}
    assert BearerAuth("t").headers() == {"authorization": "Bearer t"}
    assert HeaderAuth("X-Api-Key", "k").headers() == {"x-api-key": "k"}
    assert as_auth("t") == BearerAuth("t")
    with pytest.raises(InvalidInputError):
        as_auth(42)  # type: ignore[arg-type]
    assert "pw" not in repr(BasicAuth("user", "pw"))


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="compression"):
        ClientConfig(compression="brotli")
    with pytest.raises(InvalidInputError, match="attempts"):
        ClientConfig(retries=Retries(attempts=0))


def test_retry_delays_grow_exponentially_and_are_capped() -> None:
    policy = Retries(backoff=0.1, max_backoff=0.3)
    assert 0.075 <= policy.delay(1) <= 0.125
    assert 0.15 <= policy.delay(2) <= 0.25
    assert 0.225 <= policy.delay(5) <= 0.375


@pytest.mark.parametrize(("name", "value"), [("NBINFER_TIMEOUT", "7s"), ("NBINFER_RETRIES", "x")])
def test_a_malformed_environment_number_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidInputError, match=name) as info:
        ClientConfig.from_env()
    assert isinstance(info.value.__cause__, ValueError)
