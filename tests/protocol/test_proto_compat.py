"""nbinfer's protos are wire-compatible with Triton's and coexist with tritonclient / kserve."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, json_format
from google.protobuf.message import Message

from nbinfer.protocol._generated import grpc_service_pb2, model_config_pb2
from nbinfer.protocol.grpc import (
    pb,
    request_from_proto,
    request_to_proto,
    response_from_proto,
    response_to_proto,
)
from nbinfer.protocol.grpc_json import config_json_to_proto
from nbinfer.protocol.types import InferInput, InferOutput, InferRequest, InferResponse

tc_service = pytest.importorskip("tritonclient.grpc.service_pb2")
tc_config = pytest.importorskip("tritonclient.grpc.model_config_pb2")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")


# ---------------------------------------------------------------------------------------------
# Same schema


def _normalised(module: Any) -> descriptor_pb2.FileDescriptorProto:
    """The file's descriptor without what never reaches the wire (order, json names, comments)."""
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)

    def message(m: descriptor_pb2.DescriptorProto) -> None:
        m.field.sort(key=lambda f: f.number)
        for f in m.field:
            f.ClearField("json_name")
        m.nested_type.sort(key=lambda n: n.name)
        m.enum_type.sort(key=lambda e: e.name)
        for n in m.nested_type:
            message(n)

    proto.ClearField("source_code_info")
    proto.ClearField("public_dependency")
    proto.message_type.sort(key=lambda m: m.name)
    proto.enum_type.sort(key=lambda e: e.name)
    for m in proto.message_type:
        message(m)
    for service in proto.service:
        for method in service.method:
            method.ClearField("options")
    return proto


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [(grpc_service_pb2, tc_service), (model_config_pb2, tc_config)],
    ids=["grpc_service", "model_config"],
)
def test_schema_matches_triton_field_for_field(ours: Any, theirs: Any) -> None:
    mine, triton = _normalised(ours), _normalised(theirs)
    assert mine.package == triton.package == "inference"
    # Compare message by message first so a failure names the message.
    mine_msgs = {m.name: m for m in mine.message_type}
    triton_msgs = {m.name: m for m in triton.message_type}
    assert sorted(mine_msgs) == sorted(triton_msgs)
    for name, msg in triton_msgs.items():
        assert mine_msgs[name] == msg, name
    assert mine == triton


def test_messages_live_in_a_private_pool_not_the_default_one() -> None:
    from google.protobuf import descriptor_pool

    from nbinfer.protocol._generated._pool import POOL

    assert pb.ModelInferRequest.DESCRIPTOR.file.pool is POOL
    assert POOL is not descriptor_pool.Default()
    # tritonclient owns the default pool's definition, untouched by nbinfer.
    default = descriptor_pool.Default().FindMessageTypeByName("inference.ModelInferRequest")
    assert default is tc_service.ModelInferRequest.DESCRIPTOR


# ---------------------------------------------------------------------------------------------
# Same process, both import orders


_NBINFER_IMPORTS = """
import nbinfer
import nbinfer.protocol.grpc as g
from nbinfer.protocol.grpc_json import config_json_to_proto
from nbinfer.protocol.types import InferInput, InferRequest
"""

_TRITON_IMPORTS = """
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2 as tpb
"""

_USE_BOTH = """
import numpy as np
ours = g.request_to_proto(InferRequest([InferInput("x", "FP32", [2],
    np.array([1.5, 2.5], dtype=np.float32))], model_name="m"))
theirs = tpb.ModelInferRequest.FromString(ours.SerializeToString())
assert theirs.model_name == "m" and list(theirs.inputs[0].shape) == [2]
inp = tg.InferInput("y", [3], "INT32")
inp.set_data_from_numpy(np.array([1, 2, 3], dtype=np.int32))
back = g.request_from_proto(g.pb.ModelInferRequest.FromString(
    tpb.ModelInferRequest(inputs=[inp._get_tensor()],
                          raw_input_contents=[inp._get_content()]).SerializeToString()))
assert back.inputs[0].data.tolist() == [1, 2, 3]
print("OK")
"""

_ORDERS = {
    "nbinfer-first": _NBINFER_IMPORTS + _TRITON_IMPORTS,
    "tritonclient-first": _TRITON_IMPORTS + _NBINFER_IMPORTS,
}
_KSERVE_IMPORTS = """
from kserve.protocol.grpc import grpc_predict_v2_pb2 as kpb
"""

# kserve and tritonclient both claim ``inference.*`` in the default pool, so they cannot share a
# process with each other; nbinfer must share one with either.
_USE_KSERVE = """
import numpy as np
ours = g.request_to_proto(InferRequest([InferInput("x", "INT32", [2],
    np.array([7, 8], dtype=np.int32))], model_name="m", parameters={"p": "v"}))
theirs = kpb.ModelInferRequest.FromString(ours.SerializeToString())
assert theirs.model_name == "m" and theirs.parameters["p"].string_param == "v"
back = g.request_from_proto(g.pb.ModelInferRequest.FromString(theirs.SerializeToString()))
assert back.inputs[0].data.tolist() == [7, 8]
print("OK")
"""


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("order", list(_ORDERS))
def test_nbinfer_and_tritonclient_import_and_work_in_one_process(order: str) -> None:
    result = _run(_ORDERS[order] + _USE_BOTH)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


@pytest.mark.parametrize("kserve_first", [True, False], ids=["kserve-first", "nbinfer-first"])
def test_nbinfer_and_kserve_import_and_work_in_one_process(kserve_first: bool) -> None:
    if (
        importlib.util.find_spec("kserve") is None
    ):  # not imported here: it clashes with tritonclient
        pytest.skip("kserve is not installed")
    imports = [_KSERVE_IMPORTS, _NBINFER_IMPORTS]
    script = "".join(imports if kserve_first else imports[::-1])
    result = _run(script + _USE_KSERVE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


def test_private_pool_works_with_the_pure_python_protobuf_backend() -> None:
    script = _ORDERS["tritonclient-first"] + _USE_BOTH
    result = _run(script, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


# ---------------------------------------------------------------------------------------------
# Field-for-field message exchange


def _as_dict(msg: Message) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def _exchange(ours: Message, their_cls: Any) -> Message:
    """ours -> bytes -> tritonclient message -> bytes -> ours; every field must survive."""
    theirs = their_cls.FromString(ours.SerializeToString())
    assert _as_dict(theirs) == _as_dict(ours)
    assert theirs.ListFields(), "nothing was parsed"
    back = type(ours).FromString(theirs.SerializeToString())
    assert back == ours
    # And a message built on their side parses identically on ours.
    assert _as_dict(type(ours).FromString(theirs.SerializeToString())) == _as_dict(theirs)
    return theirs


def _set_all_params(target: Any) -> None:
    target["b"].bool_param = True
    target["i"].int64_param = -7
    target["u"].uint64_param = 2**64 - 1
    target["d"].double_param = 0.125
    target["s"].string_param = "text"


def test_model_infer_request_with_raw_and_typed_contents_and_every_param_kind() -> None:
    msg = pb.ModelInferRequest(model_name="m", model_version="2", id="abc")
    _set_all_params(msg.parameters)
    raw = msg.inputs.add(name="raw", datatype="FP16", shape=[2, 2])
    _set_all_params(raw.parameters)
    msg.raw_input_contents.append(np.arange(4, dtype=np.float16).tobytes())
    typed = msg.inputs.add(name="typed", datatype="INT64", shape=[3])
    typed.contents.int64_contents.extend([1, -2, 2**62])
    c = msg.inputs.add(name="all", datatype="BYTES", shape=[1]).contents
    c.bool_contents.append(True)
    c.int_contents.append(-1)
    c.uint_contents.append(2**32 - 1)
    c.uint64_contents.append(2**64 - 1)
    c.fp32_contents.append(0.5)
    c.fp64_contents.append(0.25)
    c.bytes_contents.append(b"\x00\xff")
    out = msg.outputs.add(name="o")
    out.parameters["classification"].int64_param = 3
    theirs = _exchange(msg, tc_service.ModelInferRequest)
    assert theirs.parameters["u"].uint64_param == 2**64 - 1
    assert theirs.inputs[1].contents.int64_contents[2] == 2**62
    assert theirs.raw_input_contents[0] == np.arange(4, dtype=np.float16).tobytes()


def test_model_infer_response_round_trips_with_tritonclient() -> None:
    msg = pb.ModelInferResponse(model_name="m", model_version="1", id="x")
    _set_all_params(msg.parameters)
    o = msg.outputs.add(name="raw", datatype="UINT8", shape=[4])
    _set_all_params(o.parameters)
    msg.raw_output_contents.append(b"\x01\x02\x03\x04")
    msg.outputs.add(name="typed", datatype="FP64", shape=[1]).contents.fp64_contents.append(1.5)
    _exchange(msg, tc_service.ModelInferResponse)


def test_model_metadata_response_round_trips_with_tritonclient() -> None:
    msg = pb.ModelMetadataResponse(name="m", versions=["1", "2"], platform="nbinfer_python")
    msg.inputs.add(name="x", datatype="FP32", shape=[-1, 3])
    msg.outputs.add(name="y", datatype="BYTES", shape=[-1])
    _exchange(msg, tc_service.ModelMetadataResponse)


def test_model_config_response_round_trips_with_tritonclient() -> None:
    config = config_json_to_proto(
        {
            "name": "m",
            "backend": "python",
            "max_batch_size": 16,
            "input": [
                {"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 3], "format": "FORMAT_NCHW"}
            ],
            "output": [
                {"name": "y", "data_type": "TYPE_STRING", "dims": [1], "label_filename": "l.txt"}
            ],
            "instance_group": [
                {"kind": "KIND_CPU", "count": 2},
                {"kind": "KIND_GPU", "gpus": [0, 1]},
            ],
            "dynamic_batching": {
                "preferred_batch_size": [4, 8],
                "max_queue_delay_microseconds": 500,
            },
            "version_policy": {"specific": {"versions": [1, 3]}},
            "parameters": {"k": {"string_value": "v"}},
        }
    )
    theirs = _exchange(pb.ModelConfigResponse(config=config), tc_service.ModelConfigResponse)
    assert theirs.config.input[0].data_type == tc_config.TYPE_FP32
    assert list(theirs.config.instance_group[1].gpus) == [0, 1]
    assert theirs.config.dynamic_batching.max_queue_delay_microseconds == 500


def test_repository_index_response_round_trips_with_tritonclient() -> None:
    msg = pb.RepositoryIndexResponse()
    msg.models.add(name="a", version="1", state="READY")
    msg.models.add(name="b", state="UNAVAILABLE", reason="unloaded")
    _exchange(msg, tc_service.RepositoryIndexResponse)


def test_stream_and_statistics_messages_round_trip_with_tritonclient() -> None:
    stream = pb.ModelStreamInferResponse(error_message="boom")
    stream.infer_response.model_name = "m"
    _exchange(stream, tc_service.ModelStreamInferResponse)
    stats = pb.ModelStatisticsResponse()
    s = stats.model_stats.add(name="m", version="1", inference_count=4, execution_count=2)
    s.inference_stats.success.count = 2
    s.batch_stats.add(batch_size=2).compute_infer.ns = 99
    _exchange(stats, tc_service.ModelStatisticsResponse)


# ---------------------------------------------------------------------------------------------
# tritonclient's own encoders and decoders agree with ours


def test_request_built_by_tritonclient_decodes_with_our_codec() -> None:
    from tritonclient.grpc._utils import _get_inference_request

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = np.array([b"ab", b"c"], dtype=np.object_)
    inputs = [
        tritonclient_grpc.InferInput("a", [2, 3], "FP32"),
        tritonclient_grpc.InferInput("s", [2], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(s)
    outputs = [tritonclient_grpc.InferRequestedOutput("o", class_count=2)]
    theirs = _get_inference_request(
        model_name="m",
        inputs=inputs,
        model_version="1",
        request_id="r1",
        outputs=outputs,
        sequence_id=5,
        sequence_start=True,
        sequence_end=False,
        priority=1,
        timeout=None,
        parameters={"custom": 0.5},
    )
    req = request_from_proto(pb.ModelInferRequest.FromString(theirs.SerializeToString()))
    assert (req.model_name, req.model_version, req.id) == ("m", "1", "r1")
    assert req.inputs[0].data is not None and np.array_equal(req.inputs[0].data, a)
    assert req.inputs[1].data is not None and req.inputs[1].data.tolist() == [b"ab", b"c"]
    assert req.outputs[0].name == "o" and req.outputs[0].class_count == 2
    assert req.parameters == {
        "sequence_id": 5,
        "sequence_start": True,
        "sequence_end": False,
        "priority": 1,
        "custom": 0.5,
    }


def test_response_encoded_by_us_decodes_with_tritonclient_infer_result() -> None:
    f = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = np.array([b"x", b"yz"], dtype=object)
    resp = InferResponse(
        "m", [InferOutput("f", "FP64", [3, 4], f), InferOutput("b", "BYTES", [2], b)], id="q"
    )
    theirs = tc_service.ModelInferResponse.FromString(response_to_proto(resp).SerializeToString())
    result = tritonclient_grpc.InferResult(theirs)
    assert np.array_equal(result.as_numpy("f"), f)
    assert result.as_numpy("b").tolist() == [b"x", b"yz"]
    assert result.get_response().id == "q"


def test_request_encoded_by_us_round_trips_through_tritonclient_messages() -> None:
    req = InferRequest(
        [InferInput("x", "INT8", [2, 2], np.array([[1, -2], [3, -4]], dtype=np.int8))],
        model_name="m",
    )
    for raw in (True, False):
        theirs = tc_service.ModelInferRequest.FromString(
            request_to_proto(req, raw=raw).SerializeToString()
        )
        back = request_from_proto(pb.ModelInferRequest.FromString(theirs.SerializeToString()))
        assert back.inputs[0].data is not None
        assert back.inputs[0].data.tolist() == [[1, -2], [3, -4]]


def test_response_from_tritonclient_typed_contents_decodes() -> None:
    theirs = tc_service.ModelInferResponse(model_name="m")
    t = theirs.outputs.add(name="o", datatype="UINT16", shape=[3])
    t.contents.uint_contents.extend([0, 1, 65535])
    resp = response_from_proto(pb.ModelInferResponse.FromString(theirs.SerializeToString()))
    data = resp.outputs[0].data
    assert data is not None and data.dtype == np.uint16 and data.tolist() == [0, 1, 65535]
