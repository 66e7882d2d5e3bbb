"""Each error class declares its HTTP status and gRPC code once; every mapping reads them."""

from __future__ import annotations

import inspect

import pytest

from nbinfer import errors
from nbinfer.errors import (
    GRPC_CODE,
    HTTP_STATUS,
    InferenceError,
    LimitExceededError,
    ModelLoadError,
    ModelNotReadyError,
    NbinferError,
    PayloadTooLargeError,
    QueueFullError,
    ServerError,
    UnauthenticatedError,
    error_for_grpc_code,
    error_for_status,
    grpc_code_of,
    status_of,
)

CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, NbinferError) and cls.__module__ == errors.__name__
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_error_maps_to_the_status_and_code_its_class_declares(cls: type[NbinferError]) -> None:
    error = cls("boom")
    assert status_of(error) == cls.http_status and grpc_code_of(error) == cls.grpc_code
    assert HTTP_STATUS.get(cls, cls.http_status) == cls.http_status
    assert GRPC_CODE.get(cls, cls.grpc_code) == cls.grpc_code
    if issubclass(cls, ServerError):
        assert error.status == cls.http_status  # no status given: the declared one


def test_the_declarations_are_the_wire_statuses() -> None:
    assert {cls.__name__: cls.http_status for cls in HTTP_STATUS} == {
        "DataTypeError": 400,
        "InvalidInputError": 400,
        "ModelNotFoundError": 404,
        "ModelLoadError": 400,
        "ModelNotReadyError": 503,
        "QueueFullError": 503,
        "ServerUnavailableError": 503,
        "PayloadTooLargeError": 413,
        "LimitExceededError": 429,
        "PermissionDeniedError": 403,
        "UnauthenticatedError": 401,
        "InferenceError": 500,
        "UnsupportedError": 501,
    }
    assert status_of(ValueError("x")) == 500 and grpc_code_of(ValueError("x")) == "INTERNAL"


@pytest.mark.parametrize(
    ("code", "message", "cls", "status"),
    [
        ("RESOURCE_EXHAUSTED", "queue of model 'm' is full", QueueFullError, 503),
        ("RESOURCE_EXHAUSTED", "message larger than max (9 vs. 4)", PayloadTooLargeError, 413),
        (
            "RESOURCE_EXHAUSTED",
            "the limit of 64 regions per caller is reached (--max-shm-regions-per-caller)",
            LimitExceededError,
            429,
        ),
        ("UNAVAILABLE", "This API is restricted, expecting header 'k'", UnauthenticatedError, 403),
        ("UNAVAILABLE", "model 'm' is not ready", ModelNotReadyError, 503),
        ("INVALID_ARGUMENT", "failed to load model 'm': bad", ModelLoadError, 400),
        ("UNKNOWN", "it broke", InferenceError, 500),
        ("DATA_LOSS", "gone", ServerError, 500),
    ],
)
def test_a_grpc_code_gets_its_class_and_that_class_status(
    code: str, message: str, cls: type[ServerError], status: int
) -> None:
    error = error_for_grpc_code(code, message)
    assert type(error) is cls and error.status == status and error.context["grpc_code"] == code


@pytest.mark.parametrize("cls", [c for c in HTTP_STATUS if issubclass(c, ServerError)])
def test_a_status_read_back_is_the_status_sent(cls: type[ServerError]) -> None:
    error = error_for_status(cls.http_status, "no words that refine it")
    assert error.status == cls.http_status and isinstance(error, ServerError)
    assert error_for_grpc_code(cls.grpc_code, "plain").grpc_code == cls.grpc_code
