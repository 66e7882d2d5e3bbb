"""The transport tests run against the client tests' embedded server (``server``, ``url``)."""

from tests.client.conftest import server, url  # noqa: F401 - fixtures, shared
