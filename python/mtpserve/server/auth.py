"""--api_key: every route but the open ones (/health) needs `Authorization: Bearer <key>`."""
from __future__ import annotations

import secrets

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
