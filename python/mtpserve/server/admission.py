"""Refusing generation requests before any work is spent on them."""
from __future__ import annotations

from typing import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from mtpserve.server.errors import APIError


class AdmissionMiddleware:
    """Asks `check` (which raises APIError: a full queue, a draining or unhealthy server) before a
    generation request's body is read, parsed or tokenized, and answers the refusal at once. Under
    a burst the excess then costs little more than its connection. An unread body is no problem:
    uvicorn drops what is left of it and keeps the connection."""

    def __init__(self, app: ASGIApp, check: Callable[[], None], paths: tuple[str, ...]):
        self.app, self.check, self.paths = app, check, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.paths:
            try:
                self.check()
            except APIError as e:
                return await e.response()(scope, receive, send)
        await self.app(scope, receive, send)
