"""Errors in OpenAI's JSON shape, {"error": {"message", "type", "param", "code"}}, and the handlers
that turn every failure (ours, FastAPI's validation, unknown routes, crashes) into one."""
from __future__ import annotations

import logging
import uuid
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger("mtpserve.server")

# OpenAI's error types by status.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
               405: "invalid_request_error", 408: "timeout_error", 413: "invalid_request_error",
               422: "invalid_request_error", 500: "server_error", 503: "service_unavailable"}


class APIError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 type: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = type or ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
        self.headers = headers

    def body(self) -> dict:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(message: str, type: str, param: str | None = None, code: str | int | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | int | None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthErrorResponse(ErrorResponse):
    status: str  # "draining" or "unhealthy"


def documented_errors(*statuses: int) -> dict:
    """The `responses` of a route's OpenAPI entry for the error statuses it can answer, all in
    OpenAI's shape; 422 replaces FastAPI's own HTTPValidationError, which this server never sends."""
    return {status: {"model": ErrorResponse, "description": HTTPStatus(status).phrase} for status in statuses}


def _short_repr(value, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None, bool]:
    """One readable line per problem, e.g. "max_tokens: Input should be a valid integer (got 'x')";
    the last item is True when the body is not JSON at all."""
    lines, params, not_json = [], [], False
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx", {}).get("error", "")
            lines.append(f"the request body is not valid JSON{': ' + str(ctx) if ctx else ''}")
            not_json = True
            continue
        where = ".".join(loc)
        if loc:
            params.append(loc[0])  # the top-level field, as OpenAI reports it
        got = f" (got {_short_repr(err['input'])})" if "input" in err and err.get("type") != "missing" else ""
        lines.append(f"{where + ': ' if where else ''}{err.get('msg', 'invalid value')}{got}")
    if not lines:
        lines = ["the request body does not match the expected schema"]
    lines = list(dict.fromkeys(lines))
    if len(lines) > 5:
        lines = lines[:5] + [f"and {len(lines) - 5} more problems"]
    return "; ".join(lines), (params[0] if params else None), not_json


class CatchAllMiddleware:
    """Answers an exception the handlers left unhandled with the 500 below, without re-raising it.

    Starlette's own catch-all (ServerErrorMiddleware) sends its handler's response and then
    re-raises, and uvicorn closes the keep-alive connection of every request that raised: a client
    that had already reused that connection for its next request saw a connection reset (issue 17:
    4 of 1,500 fuzzed requests). Mid-stream (the response started) there is nothing to answer
    with, and the exception goes on to uvicorn, which ends the connection."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise
            await internal_error_response(scope.get("method", "?"), scope.get("path", "?"), exc)(
                scope, receive, send)


def internal_error_response(method: str, path: str, exc: BaseException) -> JSONResponse:
    # The details (which can name C++ signatures, object addresses, paths) go to the log only;
    # the client gets an id to find them there.
    incident = uuid.uuid4().hex[:12]
    logger.error("unhandled error in %s %s (incident %s)", method, path, incident, exc_info=exc)
    return APIError(500, f"internal server error (incident {incident}; the details are in the server log)"
                    ).response()


def install_error_handlers(app: FastAPI) -> None:
    """The handlers, plus CatchAllMiddleware: call this before adding other middleware, so that it
    sits innermost (right around the routes)."""
    app.add_middleware(CatchAllMiddleware)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError):
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        # A body that is not JSON: 400, as OpenAI and vLLM answer. JSON that does not fit the schema
        # (wrong types, missing fields): 422. Values that fit the schema but are not allowed are
        # 400s raised by the handlers.
        message, param, not_json = _validation_message(exc)
        return APIError(400 if not_json else 422, message, param=param).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        else:
            message = str(exc.detail)
        return JSONResponse(APIError(exc.status_code, message).body(), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):  # raised outside CatchAllMiddleware
        return internal_error_response(request.method, request.url.path, exc)
