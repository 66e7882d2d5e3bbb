"""The stop button and a client closed under its threads with every pycurl the package allows: the
oldest (pyproject's lower bound) and the newest release the range admits.

Each version is installed into a directory of its own, first on ``PYTHONPATH`` of the child
process under test (``tests/package_range.py``). The range comes from these runs: pycurl 7.45.x
(7.45.3, 7.45.4 and 7.45.7 tried) swallows the KeyboardInterrupt the stop button raises in
libcurl's progress callback, so a blocking HTTP call ended in ``TransportError`` ("Callback
aborted") instead of KeyboardInterrupt; 7.46.0 to 7.49.0 raise it. pycurl 7.49 closes a dropped
handle in its finalizer with the GIL released, which ``CurlEngine.close()`` on another thread once
raced (failing, or aborting the process on pycurl's own assertion).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nbinfer.session import Session
from tests.package_range import env_first_on_path, install
from tests.test_interrupt import CURL_CHILD, interrupt_child, session  # noqa: F401 - fixture

#: tests/client/test_client.py's close race, in a child that imports the pycurl under test.
CLOSE_RACE = textwrap.dedent(
    """
    import sys
    import pycurl
    from tests.client.test_client import close_as_threads_end

    close_as_threads_end(sys.argv[1], http_engine="pycurl")
    print(pycurl.version.split()[0], "closed 200 clients", flush=True)
    """
)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", params=["oldest", "newest"])
def pycurl_site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, dict[str, str]]:
    """(version, environment running it) for each end of pyproject's pycurl range."""
    target: Path = tmp_path_factory.mktemp(f"pycurl-{request.param}")
    version = install(target, "pycurl", request.param)
    return version, env_first_on_path(target)


@pytest.fixture
def child(
    session: Session,  # noqa: F811 - the fixture imported above
    pycurl_site: tuple[str, dict[str, str]],
) -> tuple[str, dict[str, str], str]:
    """(pycurl version, the child's environment, the session server's HTTP URL)."""
    assert session.server is not None
    version, env = pycurl_site
    return version, env, session.server.http_url


def test_the_stop_button_interrupts_a_blocking_http_call(
    session: Session,  # noqa: F811 - the fixture imported above
    child: tuple[str, dict[str, str], str],
) -> None:
    version, env, url = child
    code = CURL_CHILD + "import pycurl\nprint(pycurl.version.split()[0], flush=True)\n"
    rest = interrupt_child(session, url, code, env)
    assert rest.split() == [f"PycURL/{version}"]  # the child ran the pycurl under test


def test_a_client_closed_as_its_threads_end(child: tuple[str, dict[str, str], str]) -> None:
    version, env, url = child
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_RACE, url],
        cwd=ROOT,  # where ``tests`` imports from
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"PycURL/{version} closed 200 clients"
