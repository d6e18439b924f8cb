"""The OpenAI-compatible HTTP server: AsyncEngine (the C++ engine seen from asyncio), build_app
(the FastAPI app), serve (what `mtpserve serve` runs) and BackgroundServer (an app on a thread)."""
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine, RequestStream, StreamDelta
from mtpserve.server.serve import BackgroundServer, serve

__all__ = ["AsyncEngine", "BackgroundServer", "RequestStream", "StreamDelta", "build_app", "serve"]
