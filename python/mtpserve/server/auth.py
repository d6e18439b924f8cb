"""--api_key: every route but the open ones (/health) needs `Authorization: Bearer <key>`; the
request-body limit (413)."""
from __future__ import annotations

import secrets

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mtpserve.server.errors import APIError


class ApiKeyMiddleware:
    """Plain ASGI middleware (not BaseHTTPMiddleware), so streaming and disconnects pass through."""

    def __init__(self, app: ASGIApp, api_key: str, open_paths: tuple[str, ...] = ("/health",)):
        self.app, self.open_paths = app, open_paths
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths or scope["method"] == "OPTIONS":
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization")
        if given is None:
            error = APIError(401, "missing API key: send the header 'Authorization: Bearer <key>'",
                             code="invalid_api_key")
        elif not secrets.compare_digest(given, self._expected):
            error = APIError(401, "incorrect API key provided", code="invalid_api_key")
        else:
            return await self.app(scope, receive, send)
        response: JSONResponse = error.response()
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)


class BodySizeLimitMiddleware:
    """Request bodies over max_bytes get a 413 in OpenAI's error format before anything parses
    them. A body announced by Content-Length is refused at once; it is read and dropped first (up
    to a bound), so that the client, still sending, reads the 413 instead of a connection reset.
    A chunked body is counted as it arrives."""

    DRAIN_FACTOR = 8  # read and drop at most this many times max_bytes before answering

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    def _error(self, size: str) -> JSONResponse:
        return APIError(413, f"the request body ({size}) is larger than the server's limit of {self.max_bytes} "
                             f"bytes (--max_body_bytes)", code="request_too_large").response()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            try:
                announced = int(length)
            except ValueError:
                announced = -1
            if announced > self.max_bytes:
                if announced <= self.DRAIN_FACTOR * self.max_bytes:
                    more = True
                    while more:
                        message = await receive()
                        more = message.get("type") == "http.request" and message.get("more_body", False)
                response = self._error(f"{announced} bytes")
                response.headers["Connection"] = "close"
                return await response(scope, receive, send)
            return await self.app(scope, receive, send)
        received = 0

        async def counting_receive():
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise StarletteHTTPException(413, f"the request body is larger than the server's limit of "
                                                      f"{self.max_bytes} bytes (--max_body_bytes)")
            return message

        return await self.app(scope, counting_receive, send)
