"""KServe's v2 data types and clients over nbinfer: change ``from kserve import ...`` to this.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

``InferRequest`` / ``InferResponse`` / ``InferInput`` / ``InferOutput`` / ``RequestedOutput``
with KServe's constructors and methods (``from_rest``, ``to_rest``, ``from_bytes``,
``from_grpc``, ``to_grpc``, ``to_dict``, ``as_dataframe``, ``get_input_by_name``,
``get_output_by_name``), ``RESTConfig`` and the asyncio ``InferenceRESTClient`` /
``InferenceGRPCClient``. The wire work is nbinfer's (:mod:`nbinfer.protocol`); the gRPC messages
are nbinfer's v2 messages, wire-identical to KServe's.

Example::

    from nbinfer.compat.kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig

    client = InferenceRESTClient(RESTConfig(protocol="v2"))
    x = InferInput("INPUT0", [1, 4], "FP32")
    x.set_data_from_numpy(np.ones((1, 4), np.float32))
    response = await client.infer(url, InferRequest("m", [x]), model_name="m")
    response.outputs[0].as_numpy()
"""

from __future__ import annotations

import dataclasses
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.client import AsyncClient
from nbinfer.compat._kserve_values import (
    _BINARY,
    InvalidInput,
    _kserve_errors,
    _rest_body,
    deserialize_bytes_tensor,
    serialize_byte_tensor,
    to_grpc_parameters,
    to_http_parameters,
)
from nbinfer.config import ClientConfig
from nbinfer.protocol import grpc as _grpc
from nbinfer.protocol import jsonvalues as _json
from nbinfer.protocol import rest as _rest
from nbinfer.protocol import types as _t
from nbinfer.protocol.tensors import as_array

__all__ = [
    "InferInput",
    "InferOutput",
    "InferRequest",
    "InferResponse",
    "InferenceGRPCClient",
    "InferenceRESTClient",
    "InvalidInput",
    "RESTConfig",
    "RequestedOutput",
    "deserialize_bytes_tensor",
    "serialize_byte_tensor",
    "to_grpc_parameters",
    "to_http_parameters",
]


class _Tensor:
    """What KServe's InferInput and InferOutput share: name, shape, datatype, data, parameters."""

    def __init__(
        self,
        name: str,
        shape: Sequence[int],
        datatype: str,
        data: Any = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.shape = [int(d) for d in shape]
        self.datatype = datatype
        self.data = data
        self.parameters: dict[str, Any] = dict(parameters or {})

    @_kserve_errors
    def set_data_from_numpy(self, tensor: np.ndarray[Any, Any], binary_data: bool = True) -> None:
        """Attach a numpy array (its shape becomes the tensor's).

        Raises:
            InvalidInput: Not an array, or its dtype does not fit the datatype.
        """
        if not isinstance(tensor, np.ndarray):
            raise InvalidInput(f"{self.name!r}: data must be a numpy array")
        arr, datatype = as_array(tensor)
        if datatype != self.datatype:
            raise InvalidInput(
                f"{self.name!r}: numpy {tensor.dtype} is {datatype}, expected {self.datatype}",
                tensor=self.name,
            )
        self.shape = list(arr.shape)
        self.data = arr
        self.parameters[_BINARY] = binary_data

    @_kserve_errors
    def as_numpy(self) -> np.ndarray[Any, Any]:
        """The data as a numpy array of the tensor's shape (BYTES: an object array of bytes).

        Raises:
            InvalidInput: No data, or it does not fit the shape / datatype.
        """
        if self.data is None:
            raise InvalidInput(f"{self.name!r} has no data", tensor=self.name)
        arr, _ = as_array(self.data, self.datatype)  # no copy when the dtype already fits
        return arr.reshape(self.shape)

    @_kserve_errors
    def to_dict(self) -> dict[str, Any]:
        """The v2 JSON object of the tensor (data as JSON)."""
        doc: dict[str, Any] = {"name": self.name, "shape": self.shape, "datatype": self.datatype}
        params = {k: v for k, v in self.parameters.items() if k != _BINARY}
        if params:
            doc["parameters"] = params
        if self.data is not None:
            data = _json.tensor_to_json(self.as_numpy(), self.datatype, name=self.name)
            doc["data"] = data.tolist() if isinstance(data, np.ndarray) else data
        return doc

    def _binary(self) -> bool:
        return bool(self.parameters.get(_BINARY, False))

    def _plain(self) -> tuple[str, str, list[int], np.ndarray[Any, Any] | None, _t.Parameters]:
        params = {k: v for k, v in self.parameters.items() if k != _BINARY}
        data = None if self.data is None else self.as_numpy()
        return self.name, self.datatype, list(self.shape), data, params

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Tensor)
        return self._plain()[:3] == other._plain()[:3] and (
            (self.data is None and other.data is None)
            or (
                self.data is not None
                and other.data is not None
                and np.array_equal(self.as_numpy(), other.as_numpy())
            )
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.shape}, {self.datatype!r})"


class InferInput(_Tensor):
    """An input tensor: ``InferInput(name, shape, datatype, data=None, parameters=None)``."""

    @_kserve_errors
    def as_string(self) -> list[str]:
        """A BYTES input's elements decoded as UTF-8."""
        return [bytes(b).decode("utf-8") for b in self.as_numpy().ravel()]

    def _to_nbinfer(self) -> _t.InferInput:
        return _t.InferInput(*self._plain())

    @classmethod
    def _from_nbinfer(cls, item: _t.InferInput | _t.InferOutput) -> Any:
        return cls(item.name, item.shape, item.datatype, item.data, item.parameters)


class InferOutput(InferInput):
    """An output tensor: ``InferOutput(name, shape, datatype, data=None, parameters=None)``."""

    def _to_output(self) -> _t.InferOutput:
        return _t.InferOutput(*self._plain())


class RequestedOutput:
    """An output a request asks for: ``RequestedOutput(name, parameters=None)``."""

    def __init__(self, name: str, parameters: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.parameters: dict[str, Any] = dict(parameters or {})

    @property
    def binary_data(self) -> bool | None:
        """Whether the output is asked for as binary data (``None``: not said)."""
        value = self.parameters.get(_BINARY)
        return None if value is None else bool(value)

    def _to_nbinfer(self) -> _t.RequestedOutput:
        params = {k: v for k, v in self.parameters.items() if k not in (_BINARY, "classification")}
        return _t.RequestedOutput(
            self.name,
            self.binary_data,
            int(self.parameters.get("classification", 0) or 0),
            params,
        )


class InferRequest:
    """A v2 request in KServe's shape.

    ``InferRequest(model_name, infer_inputs, request_id=None, ..., parameters=None,
    request_outputs=None, model_version=None)``; :meth:`to_nbinfer` gives nbinfer's
    :class:`~nbinfer.InferRequest`.
    """

    def __init__(
        self,
        model_name: str,
        infer_inputs: list[InferInput],
        request_id: str | None = None,
        raw_inputs: Any = None,
        from_grpc: bool = False,
        parameters: Mapping[str, Any] | None = None,
        request_outputs: list[RequestedOutput] | None = None,
        model_version: str | None = None,
    ) -> None:
        self.model_name = model_name
        self.inputs = list(infer_inputs)
        self.id = request_id
        self._from_grpc = from_grpc
        self.parameters: dict[str, Any] = dict(parameters or {})
        self.request_outputs = list(request_outputs or [])
        self.model_version = model_version

    @property
    def use_binary_outputs(self) -> bool:
        """Whether binary outputs were asked for (request-level ``binary_data_output``)."""
        return bool(self.parameters.get("binary_data_output", False))

    def get_input_by_name(self, name: str) -> InferInput | None:
        """The input called ``name`` (``None`` if there is none, as KServe)."""
        return next((i for i in self.inputs if i.name == name), None)

    # -- nbinfer <-> KServe --------------------------------------------------------------

    def to_nbinfer(self) -> _t.InferRequest:
        """This request as nbinfer's :class:`~nbinfer.InferRequest`."""
        return _t.InferRequest(
            [i._to_nbinfer() for i in self.inputs],
            [o._to_nbinfer() for o in self.request_outputs],
            id=self.id or "",
            parameters=dict(self.parameters),
            model_name=self.model_name,
            model_version=self.model_version or "",
        )

    @classmethod
    def from_nbinfer(cls, request: _t.InferRequest, *, from_grpc: bool = False) -> InferRequest:
        """Wrap nbinfer's :class:`~nbinfer.InferRequest`."""
        outputs = [
            RequestedOutput(
                o.name,
                {
                    **o.parameters,
                    **({_BINARY: o.binary_data} if o.binary_data is not None else {}),
                    **({"classification": o.class_count} if o.class_count else {}),
                },
            )
            for o in request.outputs
        ]
        return cls(
            request.model_name,
            [InferInput._from_nbinfer(i) for i in request.inputs],
            request_id=request.id or None,
            from_grpc=from_grpc,
            parameters=request.parameters,
            request_outputs=outputs,
            model_version=request.model_version or None,
        )

    # -- codecs --------------------------------------------------------------------------

    @classmethod
    @_kserve_errors
    def from_bytes(cls, req_bytes: bytes, json_length: int | None, model_name: str) -> InferRequest:
        """Decode a REST body (JSON header + binary tensors) as a server receives it."""
        request = _rest.decode_request(req_bytes, json_length)
        request.model_name = model_name
        return cls.from_nbinfer(request)

    @classmethod
    @_kserve_errors
    def from_rest(cls, request: Mapping[str, Any], model_name: str = "") -> InferRequest:
        """Decode a v2 JSON request (a dict)."""
        return cls.from_bytes(_json.dumps(dict(request)), None, model_name)

    @classmethod
    @_kserve_errors
    def from_grpc(cls, request: Any) -> InferRequest:
        """Decode a ``ModelInferRequest`` message."""
        return cls.from_nbinfer(_grpc.request_from_proto(request), from_grpc=True)

    @_kserve_errors
    def to_rest(self) -> tuple[bytes | dict[str, Any], int | None]:
        """The REST body: ``(dict, None)``, or ``(bytes, json_length)`` with binary inputs.

        An input is binary after ``set_data_from_numpy(..., binary_data=True)`` (KServe's
        default).
        """
        binary = any(i._binary() for i in self.inputs)
        return _rest_body(
            *_rest.encode_request(
                self.to_nbinfer(), binary=binary, binary_outputs=self.use_binary_outputs or None
            )
        )

    @_kserve_errors
    def to_grpc(self) -> Any:
        """The ``ModelInferRequest`` message."""
        return _grpc.request_to_proto(self.to_nbinfer())

    @_kserve_errors
    def to_dict(self) -> dict[str, Any]:
        """The v2 JSON request (data as JSON)."""
        doc: dict[str, Any] = {"id": self.id, "inputs": [i.to_dict() for i in self.inputs]}
        if self.parameters:
            doc["parameters"] = dict(self.parameters)
        if self.request_outputs:
            doc["outputs"] = [
                {"name": o.name, "parameters": dict(o.parameters)} for o in self.request_outputs
            ]
        return doc

    @_kserve_errors
    def as_dataframe(self) -> Any:
        """One column per input (``[n, k]`` inputs: a column of rows); BYTES as text."""
        import pandas as pd

        columns: dict[str, Any] = {}
        for item in self.inputs:
            arr = item.as_numpy()
            if item.datatype == "BYTES":
                arr = np.array([bytes(b).decode("utf-8") for b in arr.ravel()], dtype=object)
                arr = arr.reshape(item.shape)
            if arr.ndim <= 1 or (arr.ndim == 2 and arr.shape[1] == 1):
                columns[item.name] = arr.reshape(-1)
            else:
                columns[item.name] = list(arr)
        return pd.DataFrame(columns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InferRequest):
            return NotImplemented
        return (
            self.model_name == other.model_name
            and self.id == other.id
            and self.parameters == other.parameters
            and self.inputs == other.inputs
        )

    __hash__ = None  # type: ignore[assignment]


class InferResponse:
    """A v2 response in KServe's shape.

    ``InferResponse(response_id, model_name, infer_outputs, model_version=None, ...,
    parameters=None, use_binary_outputs=False)``; :meth:`to_nbinfer` gives nbinfer's
    :class:`~nbinfer.InferResponse`.
    """

    def __init__(
        self,
        response_id: str,
        model_name: str,
        infer_outputs: list[InferOutput],
        model_version: str | None = None,
        raw_outputs: Any = None,
        from_grpc: bool = False,
        parameters: Mapping[str, Any] | None = None,
        use_binary_outputs: bool = False,
        requested_outputs: list[RequestedOutput] | None = None,
    ) -> None:
        self.id = response_id
        self.model_name = model_name
        self.outputs = list(infer_outputs)
        self.model_version = model_version
        self._from_grpc = from_grpc
        self.parameters: dict[str, Any] = dict(parameters or {})
        self.use_binary_outputs = use_binary_outputs
        self.requested_outputs = list(requested_outputs or [])

    def get_output_by_name(self, name: str) -> InferOutput | None:
        """The output called ``name`` (``None`` if there is none, as KServe)."""
        return next((o for o in self.outputs if o.name == name), None)

    def to_nbinfer(self) -> _t.InferResponse:
        """This response as nbinfer's :class:`~nbinfer.InferResponse`."""
        return _t.InferResponse(
            self.model_name,
            [o._to_output() for o in self.outputs],
            model_version=self.model_version or "",
            id=self.id or "",
            parameters=dict(self.parameters),
        )

    @classmethod
    def from_nbinfer(cls, response: _t.InferResponse, *, from_grpc: bool = False) -> InferResponse:
        """Wrap nbinfer's :class:`~nbinfer.InferResponse`."""
        return cls(
            response.id,
            response.model_name,
            [InferOutput._from_nbinfer(o) for o in response.outputs],
            model_version=response.model_version or None,
            from_grpc=from_grpc,
            parameters=response.parameters,
        )

    @classmethod
    @_kserve_errors
    def from_bytes(cls, res_bytes: bytes, json_length: int | None) -> InferResponse:
        """Decode a REST response body (JSON header + binary tensors)."""
        return cls.from_nbinfer(_rest.decode_response(res_bytes, json_length))

    @classmethod
    @_kserve_errors
    def from_rest(cls, response: Mapping[str, Any]) -> InferResponse:
        """Decode a v2 JSON response (a dict)."""
        return cls.from_bytes(_json.dumps(dict(response)), None)

    @classmethod
    @_kserve_errors
    def from_grpc(cls, response: Any) -> InferResponse:
        """Decode a ``ModelInferResponse`` message."""
        return cls.from_nbinfer(_grpc.response_from_proto(response), from_grpc=True)

    @_kserve_errors
    def to_rest(self) -> tuple[bytes | dict[str, Any], int | None]:
        """The REST body: ``(dict, None)``, or ``(bytes, json_length)`` with binary outputs."""
        binary = self.use_binary_outputs or [o.name for o in self.outputs if o._binary()]
        return _rest_body(*_rest.encode_response(self.to_nbinfer(), binary_outputs=binary))

    @_kserve_errors
    def to_grpc(self) -> Any:
        """The ``ModelInferResponse`` message."""
        return _grpc.response_to_proto(self.to_nbinfer())

    @_kserve_errors
    def to_dict(self) -> dict[str, Any]:
        """The v2 JSON response (data as JSON)."""
        doc: dict[str, Any] = {
            "id": self.id,
            "model_name": self.model_name,
            "outputs": [o.to_dict() for o in self.outputs],
        }
        if self.model_version:
            doc["model_version"] = self.model_version
        if self.parameters:
            doc["parameters"] = dict(self.parameters)
        return doc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InferResponse):
            return NotImplemented
        return (
            self.model_name == other.model_name
            and self.id == other.id
            and self.outputs == other.outputs
        )

    __hash__ = None  # type: ignore[assignment]


# ------------------------------------------------------------------------------------ clients


@dataclasses.dataclass
class RESTConfig:
    """KServe's ``RESTConfig`` fields; :meth:`ClientConfig.from_rest_config` reads them.

    A ``transport`` (an ``httpx.AsyncBaseTransport``) or an ``auth`` that is an httpx auth flow
    (an ``httpx.Auth`` other than ``BasicAuth``) goes into one ``httpx.AsyncClient``, as in
    KServe, and the calls run on nbinfer's httpx engine (``http_engine="httpx"``).
    """

    transport: Any = None
    protocol: str = "v1"
    retries: int = 3
    http2: bool = False
    timeout: Any = 60
    cert: Any = None
    verify: Any = True
    auth: Any = None
    verbose: bool = False

    def __post_init__(self) -> None:
        self.protocol = str(getattr(self.protocol, "value", self.protocol))


class InferenceRESTClient:
    """KServe's asyncio REST client (v1 and v2) over :class:`nbinfer.AsyncClient`.

    Each call names its server (``base_url``); one nbinfer client per server is kept.
    """

    def __init__(self, config: RESTConfig | None = None) -> None:
        self._config = config or RESTConfig()
        auth = self._config.auth
        #: An httpx auth flow nbinfer's config cannot carry: the httpx client runs it.
        self._auth_flow = auth if _is_auth_flow(auth) else None
        fields = self._config if self._auth_flow is None else {**vars(self._config), "auth": None}
        self._client_config = ClientConfig.from_rest_config(fields)
        self._clients: dict[str, AsyncClient] = {}
        #: The httpx client for a transport / auth flow (KServe's own shape), made on first use.
        self._httpx: Any = None

    def _httpx_client(self) -> Any:
        wanted = self._config.transport is not None or self._auth_flow is not None
        if self._httpx is None and wanted:
            import httpx

            verify = self._config.verify  # used when there is no transport of the user's
            if isinstance(verify, (str, os.PathLike)):
                verify = ssl.create_default_context(cafile=os.fspath(verify))
            self._httpx = httpx.AsyncClient(
                transport=self._config.transport, auth=self._auth_flow, verify=verify
            )
        return self._httpx

    def _client(self, base_url: Any) -> AsyncClient:
        url = str(base_url).rstrip("/")
        client = self._clients.get(url)
        if client is None:
            client = AsyncClient(
                url, protocol="http", config=self._client_config, httpx_client=self._httpx_client()
            )
            self._clients[url] = client
        return client

    @staticmethod
    def _timeout(timeout: Any) -> float | None:
        return float(timeout) if isinstance(timeout, (int, float)) else None

    async def is_server_live(
        self, base_url: Any, headers: Mapping[str, str] | None = None, timeout: Any = None
    ) -> bool:
        """Whether the server is live."""
        client = self._client(base_url)
        return await client.is_server_live(headers=headers, timeout=self._timeout(timeout))

    async def is_server_ready(
        self, base_url: Any, headers: Mapping[str, str] | None = None, timeout: Any = None
    ) -> bool:
        """Whether the server is ready."""
        client = self._client(base_url)
        return await client.is_server_ready(headers=headers, timeout=self._timeout(timeout))

    async def is_model_ready(
        self,
        base_url: Any,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        timeout: Any = None,
    ) -> bool:
        """Whether the model is ready."""
        client = self._client(base_url)
        return await client.is_model_ready(
            model_name, headers=headers, timeout=self._timeout(timeout)
        )

    async def infer(
        self,
        base_url: Any,
        data: InferRequest | Mapping[str, Any],
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
        is_graph_endpoint: bool = False,
        timeout: Any = None,
    ) -> InferResponse | dict[str, Any]:
        """v2: an :class:`InferResponse`; v1: the JSON answer (``{"predictions": ...}``).

        Raises:
            NbinferError: The call failed (the most specific class of nbinfer's error tree).
        """
        client = self._client(base_url)
        seconds = self._timeout(timeout)
        if isinstance(data, InferRequest):
            request = data.to_nbinfer()
            name = model_name or data.model_name
        else:
            if self._config.protocol == "v1":
                name = model_name or ""
                instances = data.get("instances", data.get("inputs"))
                predictions = await client.predict(
                    name, instances, headers=headers, timeout=seconds
                )
                return {"predictions": predictions}
            request = InferRequest.from_rest(data, model_name or "").to_nbinfer()
            name = model_name or ""
        if not name:
            raise InvalidInput("infer needs a model_name (or an InferRequest naming one)")
        result = await client.infer(name, request, headers=headers, timeout=seconds)
        if response_headers is not None:
            response_headers.update(result.headers)
        return InferResponse.from_nbinfer(result.response)

    async def explain(
        self,
        base_url: Any,
        model_name: str,
        data: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        timeout: Any = None,
    ) -> Any:
        """v1 ``:explain``: the server's JSON answer."""
        client = self._client(base_url)
        instances = data.get("instances", data)
        return await client.explain(
            model_name, instances, headers=headers, timeout=self._timeout(timeout)
        )

    async def close(self) -> None:
        """Close every connection."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()
        own, self._httpx = self._httpx, None
        if own is not None:  # closes RESTConfig.transport too, as KServe's close() does
            await own.aclose()


def _is_auth_flow(auth: Any) -> bool:
    """An httpx auth flow other than ``BasicAuth`` (whose header nbinfer's config carries)."""
    return hasattr(auth, "auth_flow") and not isinstance(getattr(auth, "_auth_header", None), str)


class InferenceGRPCClient:
    """KServe's asyncio gRPC client over :class:`nbinfer.AsyncClient`."""

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        use_ssl: bool = False,
        root_certificates: str | None = None,
        private_key: str | None = None,
        certificate_chain: str | None = None,
        creds: Any = None,
        channel_args: Any = None,
        timeout: float | None = 60,
        retries: int | None = 3,
    ) -> None:
        from nbinfer.config import TLSConfig

        tls = (
            TLSConfig(ca_file=root_certificates, cert_file=certificate_chain, key_file=private_key)
            if use_ssl
            else None
        )
        self._client = AsyncClient(
            url if "://" in url else ("grpcs://" if use_ssl else "grpc://") + url,
            protocol="grpc",
            ssl=tls,
            timeout=timeout,
            retries=retries,
        )

    async def is_server_live(self, timeout: Any = None, headers: Any = None) -> bool:
        """Whether the server is live."""
        return await self._client.is_server_live(headers=_metadata(headers), timeout=timeout)

    async def is_server_ready(self, timeout: Any = None, headers: Any = None) -> bool:
        """Whether the server is ready."""
        return await self._client.is_server_ready(headers=_metadata(headers), timeout=timeout)

    async def is_model_ready(
        self, model_name: str, timeout: Any = None, headers: Any = None
    ) -> bool:
        """Whether the model is ready."""
        return await self._client.is_model_ready(
            model_name, headers=_metadata(headers), timeout=timeout
        )

    async def infer(
        self, infer_request: InferRequest, timeout: Any = None, headers: Any = None
    ) -> InferResponse:
        """Run inference; returns an :class:`InferResponse`.

        Raises:
            NbinferError: The call failed (the most specific class of nbinfer's error tree).
        """
        result = await self._client.infer(
            infer_request.model_name,
            infer_request.to_nbinfer(),
            headers=_metadata(headers),
            timeout=timeout,
        )
        return InferResponse.from_nbinfer(result.response, from_grpc=True)

    async def close(self) -> None:
        """Close the channel."""
        await self._client.aclose()

    async def __aenter__(self) -> InferenceGRPCClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _metadata(headers: Any) -> dict[str, str] | None:
    """Call metadata as KServe takes it (pairs or a mapping) -> a dict."""
    if headers is None:
        return None
    return dict(headers.items() if isinstance(headers, Mapping) else headers)
