"""HTTP statuses for memlane's error tree, in one place, and the one error body.

Every error the server returns looks like::

    {"error": {"type": "session_not_found", "message": "session 'x' does not exist; ..."}}

``type`` is stable (clients branch on it, :mod:`memlane.client` turns it back
into the library exception); ``message`` says what was wrong and how to fix it.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memlane import errors
from memlane.server.tenancy import MissingFeatureError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An HTTP-level refusal that is not a library error (auth, missing feature, size)."""

    def __init__(self, status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.headers = headers


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, {"WWW-Authenticate": "Bearer"})


#: (library class, HTTP status, error type); most specific first, the first match wins.
STATUSES: tuple[tuple[type[BaseException], int, str], ...] = (
    (MissingFeatureError, 501, "not_implemented"),
    (errors.SessionNotFoundError, 404, "session_not_found"),
    (errors.NotFoundError, 404, "not_found"),
    (errors.NoteSupersededError, 409, "note_superseded"),
    (errors.ConflictError, 409, "conflict"),
    (errors.PermissionDeniedError, 403, "permission_denied"),
    (errors.MissingExtraError, 501, "missing_extra"),
    (errors.EmbedderMismatchError, 500, "embedder_mismatch"),
    (errors.CorruptRecordError, 500, "corrupt_record"),
    (errors.CorruptDatabaseError, 500, "corrupt_database"),
    (errors.EncryptionKeyError, 500, "encryption_key"),
    (errors.EmbedderError, 503, "embedder_unavailable"),
    (errors.StorageError, 503, "storage_unavailable"),
    (errors.LockTimeoutError, 503, "lock_timeout"),
    (errors.ConfigError, 500, "config_error"),
    (errors.InvalidInputError, 422, "invalid_input"),
    (errors.MemlaneError, 500, "memlane_error"),
)


def status_for(exc: BaseException) -> tuple[int, str]:
    for cls, status, type_ in STATUSES:
        if isinstance(exc, cls):
            return status, type_
    return 500, "internal_error"


def error_body(type_: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": type_, "message": message, **extra}}


def error_response(status: int, type_: str, message: str, headers: dict[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(type_, message, **extra), status_code=status, headers=headers)


_HTTP_TYPES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 413: "payload_too_large", 415: "unsupported_media_type",
}


def _validation_message(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    details: list[dict[str, Any]] = []
    parts: list[str] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            msg = "unknown field; put extra data under 'metadata'"
        elif err.get("type") == "json_invalid":
            loc, msg = "body", f"not valid JSON ({err.get('ctx', {}).get('error', 'decode error')})"
        details.append({"loc": loc, "msg": msg})
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts) or "invalid request", details


def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into the one error body."""

    async def on_memlane(request: Request, exc: Exception) -> JSONResponse:
        status, type_ = status_for(exc)
        if status >= 500:
            log.error("request %s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
        extra: dict[str, Any] = {}
        if isinstance(exc, errors.SessionNotFoundError):
            extra["session_id"] = exc.session_id
        if isinstance(exc, errors.NoteSupersededError):
            extra.update(note_id=exc.note_id, superseded_by=exc.successor)
        return error_response(status, type_, str(exc), **extra)

    async def on_api(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.type, exc.message, exc.headers)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        message, details = _validation_message(exc)
        return error_response(422, "validation_error", message, details=details)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return error_response(exc.status_code, _HTTP_TYPES.get(exc.status_code, "http_error"),
                              message, dict(exc.headers) if exc.headers else None)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal_error", "internal server error (see the server log)")

    app.add_exception_handler(errors.MemlaneError, on_memlane)
    app.add_exception_handler(MissingFeatureError, on_memlane)
    app.add_exception_handler(ApiError, on_api)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
