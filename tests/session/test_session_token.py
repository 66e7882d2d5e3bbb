"""A Session's local server wants a token by default (issue 25, item 2 and "a token by default").

The attack: another process on the host (another local user, or the same user's other
programs) finds the session's ports in ``/proc/net/tcp`` and calls a model served from the
notebook. The attacker is a real second process: a child that imports its clients as root,
then drops to an unused uid (``tests.children.OTHER_UID``) before it looks for the ports and
connects over HTTP and gRPC; the same script without the drop is the same-uid process without
the token. Against a session started with ``auth_token=None`` the same attacker succeeds: the
attack is real.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer import Session
from nbinfer.config import GENERATE_TOKEN
from nbinfer.errors import InvalidInputError, UnauthenticatedError
from nbinfer.server.app import NO_TOKEN_WARNING
from nbinfer.server.launcher import LocalServer, parse_ready_line
from tests.children import OTHER_UID

ROWS = {"INPUT0": np.ones((1, 16), np.float32), "INPUT1": np.ones((1, 16), np.float32)}
IRIS = pd.DataFrame(
    [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]],
    columns=["sepal_length", "sepal_width", "petal_length", "petal_width"],
)

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/proc/net/tcp").exists(),
    reason="another uid needs root (setuid) and /proc/net/tcp (Linux)",
)

#: The attacker: imports as root, optionally drops to another uid, finds the session's
#: ports among the host's listening sockets, reads what /proc shows of the server process,
#: then calls a served model over HTTP and gRPC (with the token when it was given one).
_ATTACKER = r"""
import json, os, sys, urllib.error, urllib.request
import numpy as np
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

args = json.loads(sys.argv[1])
# lower case: gRPC refuses upper-case metadata keys
headers = {"authorization": "Bearer " + args["token"]} if args.get("token") else {}
BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16},
    {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [2.0] * 16},
]}).encode()


def http(method, path, body=None):
    request = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (args["http_port"], path), data=body, method=method,
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return {"status": reply.status, "body": json.loads(reply.read() or b"null")}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": json.loads(exc.read() or b"null")}


def grpc_infer():
    # a channel of its own: grpc's global pool could hand over the warm-up's root connection
    client = tg.InferenceServerClient(
        "127.0.0.1:%d" % args["grpc_port"], channel_args=[("grpc.use_local_subchannel_pool", 1)]
    )
    inputs = [tg.InferInput("INPUT0", [1, 16], "FP32"), tg.InferInput("INPUT1", [1, 16], "FP32")]
    inputs[0].set_data_from_numpy(np.ones((1, 16), np.float32))
    inputs[1].set_data_from_numpy(np.full((1, 16), 2.0, np.float32))
    try:
        out = client.infer("add_sub", inputs, headers=headers).as_numpy("OUTPUT0")
        return {"ok": out.tolist()[0][:2]}
    except InferenceServerException as exc:
        return {"status": str(exc.status()), "error": str(exc)}
    finally:
        client.close()


def listening_ports():
    # what any local user sees: /proc/net/tcp and tcp6, state 0A (LISTEN), on loopback
    loopback = ("0100007F", "0000000000000000FFFF00000100007F", "0" * 31 + "1")
    ports = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as table:
            for line in list(table)[1:]:
                fields = line.split()
                address, port = fields[1].split(":")
                if fields[3] == "0A" and address in loopback:
                    ports.append(int(port, 16))
    return ports


def proc(name):
    try:
        with open("/proc/%d/%s" % (args["pid"], name), "rb") as f:
            return {"text": f.read().replace(b"\0", b" ").decode("utf-8", "replace")}
    except OSError as exc:
        return {"denied": type(exc).__name__}


def attack():
    return {
        "uid": os.getuid(),
        "found": [p in listening_ports() for p in (args["http_port"], args["grpc_port"])],
        "cmdline": proc("cmdline"),
        "environ": proc("environ"),
        "live": http("GET", "/v2/health/live")["status"],
        "metadata": http("GET", "/v2/models/add_sub"),
        "infer": http("POST", "/v2/models/add_sub/infer", BODY),
        "grpc": grpc_infer(),
    }


attack()  # every lazy import happens now, as root
if args.get("uid") is not None:
    os.setgroups([])
    os.setgid(args["uid"])
    os.setuid(args["uid"])
print(json.dumps(attack()))
"""


def _attack(
    target: Session | LocalServer, *, uid: int | None = None, token: str | None = None
) -> Any:
    """Run the attacker against ``target``'s server (a session's, or a LocalServer); its report."""
    server = target.server if isinstance(target, Session) else target
    assert server is not None
    http_port = int(server.http_url.rsplit(":", 1)[1])
    grpc_port = int(server.grpc_url.rsplit(":", 1)[1])
    args = {"http_port": http_port, "grpc_port": grpc_port, "pid": server.pid, "uid": uid}
    if token is not None:
        args["token"] = token
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBINFER_")}
    out = subprocess.run(
        [sys.executable, "-c", _ATTACKER, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",  # a directory the other user may enter
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


def _refused(report: Any) -> None:
    """Every call but liveness was refused: 401 on HTTP, UNAUTHENTICATED on gRPC."""
    assert report["found"] == [True, True]  # the ports are in /proc/net/tcp for anyone
    assert report["live"] == 200  # liveness reveals only that the process is up
    for call in ("metadata", "infer"):
        assert report[call]["status"] == 401, report[call]
        assert "outputs" not in report[call]["body"] and "inputs" not in report[call]["body"]
    assert report["grpc"].get("status") == "StatusCode.UNAUTHENTICATED", report["grpc"]


def test_session_generates_a_token_and_its_own_client_sends_it(session: Session) -> None:
    assert session.server is not None
    token = session.token
    assert isinstance(token, str) and len(token) >= 40  # secrets.token_urlsafe(32)
    assert session.server.auth_token == token
    assert session.infer("add_sub", ROWS).as_numpy("OUTPUT0").tolist()[0][:2] == [2.0, 2.0]
    with Session(keep_previous=True, device="cpu", demo=False) as other:
        assert other.token is not None and other.token != token  # one per server


@needs_root
def test_another_uid_finds_the_port_and_is_refused_over_http_and_grpc(session: Session) -> None:
    report = _attack(session, uid=OTHER_UID)
    assert report["uid"] == OTHER_UID
    _refused(report)
    # it cannot read the token from the server process either: not in the command line it
    # can read, and the environment (where the token travels) is not readable to it
    assert session.token is not None and session.token not in report["cmdline"]["text"]
    assert "denied" in report["environ"], report["environ"]


@needs_root
def test_without_a_token_the_same_attack_succeeds() -> None:
    """The control: ``auth_token=None`` (the documented opt-out) lets another uid in."""
    with Session(keep_previous=True, device="cpu", auth_token=None) as open_session:
        assert open_session.token is None
        report = _attack(open_session, uid=OTHER_UID)
    assert report["uid"] == OTHER_UID and report["found"] == [True, True]
    assert report["infer"]["status"] == 200
    assert report["infer"]["body"]["outputs"][0]["data"][:2] == [3.0, 3.0]
    assert report["grpc"] == {"ok": [3.0, 3.0]}


def test_a_same_uid_process_without_the_token_is_refused(session: Session) -> None:
    report = _attack(session)
    assert report["uid"] == os.getuid()
    _refused(report)


def test_tritonclient_and_curl_with_session_token_are_served(session: Session) -> None:
    report = _attack(session, token=session.token)
    assert report["metadata"]["status"] == 200
    assert report["infer"]["status"] == 200
    assert report["infer"]["body"]["outputs"][0]["data"][:2] == [3.0, 3.0]
    assert report["grpc"] == {"ok": [3.0, 3.0]}
    assert session.server is not None
    curl = subprocess.run(
        [
            "curl",
            "-s",
            "-H",
            f"Authorization: Bearer {session.token}",
            f"{session.server.http_url}/v2/models/iris",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert json.loads(curl.stdout)["name"] == "iris"


def test_the_token_travels_in_the_environment_never_in_argv(session: Session) -> None:
    server = session.server
    assert server is not None and server.pid is not None and session.token is not None
    cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
    assert session.token.encode() not in cmdline
    assert session.token not in " ".join(server.command())
    environ = Path(f"/proc/{server.pid}/environ").read_bytes()
    if server.forked:  # handed over the fork server's socket: not even in /proc/PID/environ
        assert session.token.encode() not in environ
    else:
        assert f"NBINFER_AUTH_TOKEN={session.token}".encode() in environ.split(b"\0")
    assert session.token not in repr(session) and session.token not in repr(server)


def test_every_client_the_session_makes_sends_the_token(session: Session) -> None:
    # DataFrame inference, classify, async paths, metadata and statistics, profile
    frame = session.infer("iris", IRIS)
    assert frame.shape == (2, 3)
    digits = np.zeros((2, 28, 28), np.uint8)
    classes = session.classify("digits", digits, top_k=1)
    assert len(classes) == 2
    assert "add_sub" in set(session.models["name"])
    assert int(session.stats("iris")["success"].sum()) >= 1

    async def both() -> tuple[Any, Any]:
        aframe = await session.ainfer("iris", IRIS)
        return aframe, await session.aclassify("digits", digits, top_k=1)

    aframe, aclasses = asyncio.run(both())
    pd.testing.assert_frame_equal(aframe, frame)
    assert len(aclasses) == 2
    quick = {"window": 0.2, "max_windows": 2, "warmup": 0.1, "progress": False}
    for protocol in ("http", "grpc"):
        profiled = session.profile("add_sub", protocol=protocol, concurrency=[1], **quick)
        assert profiled["errors"].iloc[0] == 0 and profiled["throughput"].iloc[0] > 0
    handle = session.model("iris")
    assert handle.ready


def test_a_grpc_session_and_restart_keep_the_token() -> None:
    with Session(keep_previous=True, device="cpu", protocol="grpc", demo=True) as s:
        token = s.token
        assert s.protocol == "grpc"
        assert s.infer("add_sub", ROWS).as_numpy("OUTPUT1").tolist()[0][:2] == [0.0, 0.0]
        assert s.server is not None and s.server.pid is not None
        os.kill(s.server.pid, signal.SIGKILL)
        s.server.wait(10)
        s.restart()
        assert s.token == token
        assert s.infer("add_sub", ROWS).as_numpy("OUTPUT0").tolist()[0][:2] == [2.0, 2.0]
        # nbinfer's clients in this process are handed the token; any other is refused
        with nbinfer.Client(s.url) as own:
            assert own.get_model_metadata("add_sub").name == "add_sub"
        with (
            nbinfer.Client(s.url, auth="not-the-token") as stranger,
            pytest.raises(UnauthenticatedError),
        ):
            stranger.get_model_metadata("add_sub")
        _refused(_attack(s))  # another process without the token


def test_auth_token_options() -> None:
    with Session.local(
        keep_previous=True, device="cpu", demo=False, auth_token="chosen-token"
    ) as s:
        assert s.token == "chosen-token"
    with Session(keep_previous=True, device="cpu", demo=False, token="from-token") as s:
        assert s.token == "from-token"
    with Session(
        keep_previous=True, device="cpu", demo=False, auth="from-auth"
    ) as s:  # a bearer auth= agrees
        assert s.token == "from-auth" and s.server is not None
        assert s.server.auth_token == "from-auth"
    for bad in ("", " padded ", "non-ascii-é", 12345):
        with pytest.raises(InvalidInputError, match="auth_token"):
            Session(device="cpu", demo=False, auth_token=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="not both"):
        Session(device="cpu", demo=False, auth_token="a", token="b")
    with pytest.raises(InvalidInputError, match="not both"):
        Session(device="cpu", demo=False, auth_token="a", auth="b")
    with pytest.raises(InvalidInputError, match="bearer token"):
        Session(device="cpu", demo=False, auth=("user", "password"))
    with pytest.raises(InvalidInputError, match="local server"):
        Session("http://127.0.0.1:1", auth_token="x")
    assert repr(GENERATE_TOKEN) == "GENERATE_TOKEN"
    server = LocalServer(demo=False, auth_token=GENERATE_TOKEN)
    assert server.auth_token is not None and len(server.auth_token) >= 40
    bare = LocalServer(demo=False).auth_token  # a bare LocalServer: a token by default too
    assert bare is not None and len(bare) >= 40 and bare != server.auth_token
    assert LocalServer(demo=False, auth_token=None).auth_token is None  # the opt-out


def test_a_remote_session_reports_the_bearer_token_it_sends(session: Session) -> None:
    assert session.server is not None
    with Session(session.server.http_url, token=session.token) as remote:
        assert remote.server is None and remote.token == session.token
        assert remote.infer("iris", IRIS).shape == (2, 3)
    with Session(session.server.http_url, auth=("u", "p")) as basic:
        assert basic.token is None


def test_the_session_card_shows_how_to_connect_without_the_token_value(session: Session) -> None:
    from nbinfer.render.cards import connect_snippet

    assert session.server is not None and session.token is not None
    html = session._repr_mimebundle_()["text/html"]
    assert "Connect" in html and "session.token" in html
    assert session.token not in html  # a saved notebook carries no live credential
    snippet = connect_snippet(session)
    assert session.server.http_url in snippet and session.server.grpc_address in snippet
    assert "Authorization: Bearer {session.token}" in snippet
    assert "headers=auth" in snippet


def _serve_once(env: dict[str, str], *command: str) -> tuple[str, str]:
    """Start a server command, wait for its READY line, stop it; (stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, *command, "--demo", "--http-port", "0", "--grpc-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            lines.append(line)
            if parse_ready_line(line) is not None or time.monotonic() > deadline:
                break
        urls = parse_ready_line(lines[-1])
        assert urls is not None, "".join(lines)
        curl = subprocess.run(  # the README's curl, as written (no token on loopback)
            [
                "curl",
                "-s",
                f"{urls[0]}/v2/models/iris/infer",
                "-d",
                '{"inputs":[{"name":"input","datatype":"FP32","shape":[1,4],'
                '"data":[5.1,3.5,1.4,0.2]}]}',
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        lines.append(curl.stdout + "\n")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    return "".join(lines) + out, err


@pytest.mark.parametrize(
    "command",
    [("-m", "nbinfer.server"), ("-m", "nbinfer.cli", "serve")],
    ids=["python-m-nbinfer.server", "nbinfer-serve"],
)
def test_a_server_without_a_token_warns_once_and_curl_still_works(command: tuple[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NBINFER_AUTH_TOKEN"}
    out, err = _serve_once(env, *command)
    assert err.count(NO_TOKEN_WARNING) == 1, err
    assert NO_TOKEN_WARNING not in out  # stdout keeps the READY line clean
    assert '"outputs"' in out  # curl without a token on loopback is served
    out, err = _serve_once({**env, "NBINFER_AUTH_TOKEN": "a-token"}, *command)
    assert NO_TOKEN_WARNING not in err
    assert '"outputs"' not in out and '"error"' in out  # with a token, curl needs it
