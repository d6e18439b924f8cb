"""Diagnostics for the forty-seventh session's frontend calls, loaded into a server through PYTHONPATH (not part of
mtpserve). With FRONTEND_TRACE=<file> it times, inside `mtpserve serve`:
  arrival_to_engine  the ASGI app's first sight of a request to its add_request (server-side wait before the engine)
  tokenize_queue     encode() called on the loop to the tokenizer thread starting it
  tokenize_run       the tokenizer's encode on that thread
  tokenize_return    the thread done to the loop running the request again
  gil_wait           a thread that slept 1 ms: how much later than that it ran (waiting for the GIL)
  loop_lag           a task that slept 1 ms on the event loop: how much later than that it ran
and samples the main thread's stack every 2 ms; every 2 s it rewrites the file (JSON: percentiles in ms, the
sampled stacks' leaf frames and whole stacks counted).
FRONTEND_PROFILE=<file> also runs cProfile on the event loop's thread from its first request to the server's exit
and writes the stats there. FRONTEND_SWITCH_US=<n> sets sys.setswitchinterval(n µs); FRONTEND_INLINE_TOKENIZE=1 tokenizes on the loop;
FRONTEND_KEEP_ENCODE=1 leaves AsyncEngine.encode as the build has it (timing only arrival_to_engine); otherwise
encode is replaced by main's before 2026-12-01's change (every prompt on a tokenizer thread, the GIL held) or, with
FRONTEND_ENCODE_BATCH=1, has the tokenizer threads call the tokenizers library's encode_batch, which releases the GIL
while it encodes (its encode holds it)."""
import os
import sys

_OUT = os.environ.get("FRONTEND_TRACE")
if _OUT:
    import asyncio
    import collections
    import contextvars
    import importlib.abc
    import json
    import threading
    import time

    if os.environ.get("FRONTEND_SWITCH_US"):
        sys.setswitchinterval(int(os.environ["FRONTEND_SWITCH_US"]) * 1e-6)
    _INLINE = os.environ.get("FRONTEND_INLINE_TOKENIZE") == "1"
    _BATCH = os.environ.get("FRONTEND_ENCODE_BATCH") == "1"

    class _EncodeBatch:
        def __init__(self, tok):
            self._t = tok

        def encode(self, text, add_special_tokens=True):
            return self._t.encode_batch([text], add_special_tokens=add_special_tokens)[0]

        def __getattr__(self, name):
            return getattr(self._t, name)
    _now = time.perf_counter
    _times = collections.defaultdict(list)
    _leaves, _stacks = collections.Counter(), collections.Counter()
    _arrival = contextvars.ContextVar("arrival", default=None)
    _main = threading.main_thread().ident

    def _record(name, seconds):
        if len(_times[name]) < 400_000:
            _times[name].append(seconds)

    def _pct(values):
        v = sorted(values)
        pick = lambda q: round(1e3 * v[min(int(q * len(v)), len(v) - 1)], 3)
        return {"n": len(v), "mean": round(1e3 * sum(v) / len(v), 3), "p50": pick(0.5), "p90": pick(0.9),
                "p99": pick(0.99), "max": pick(1.0)}

    def _dump():
        data = {name: _pct(v) for name, v in list(_times.items()) if v}
        data["leaves"] = _leaves.most_common(40)
        data["stacks"] = _stacks.most_common(40)
        data["samples"] = sum(_leaves.values())
        with open(_OUT + ".tmp", "w") as f:
            json.dump(data, f, indent=1)
        os.replace(_OUT + ".tmp", _OUT)

    def _frame_name(f):
        path = f.f_code.co_filename
        parts = path.split(os.sep)
        short = "/".join(parts[-2:])
        return f"{short}:{f.f_code.co_name}"

    def _sampler():
        last_dump = _now()
        while True:
            t = _now()
            time.sleep(0.001)
            _record("gil_wait", _now() - t - 0.001)
            frame = sys._current_frames().get(_main)
            if frame is not None:
                names = []
                while frame is not None and len(names) < 14:
                    names.append(_frame_name(frame))
                    frame = frame.f_back
                _leaves[names[0]] += 1
                _stacks[" < ".join(names[:8])] += 1
            if _now() - last_dump > 2:
                _dump()
                last_dump = _now()

    threading.Thread(target=_sampler, name="frontend-trace", daemon=True).start()

    async def _loop_lag():
        while True:
            t = _now()
            await asyncio.sleep(0.001)
            _record("loop_lag", _now() - t - 0.001)

    def _patch_async_engine(mod):
        cls = mod.AsyncEngine
        add_request, started = cls.add_request, []

        def timed_add_request(self, *args, **kwargs):
            t0 = _arrival.get()
            if t0 is not None:
                _record("arrival_to_engine", _now() - t0)
            if not started:
                started.append(asyncio.get_running_loop().create_task(_loop_lag()))
                if os.environ.get("FRONTEND_PROFILE"):
                    import atexit
                    import cProfile
                    profile = cProfile.Profile()
                    profile.enable()
                    atexit.register(lambda: (profile.disable(), profile.dump_stats(os.environ["FRONTEND_PROFILE"])))
            return add_request(self, *args, **kwargs)

        async def timed_encode(self, text, add_special_tokens=True, param="prompt"):
            mod.check_text(text, param)
            if _BATCH and not isinstance(self.tokenizer._tok, _EncodeBatch):
                self.tokenizer._tok = _EncodeBatch(self.tokenizer._tok)
            if _INLINE:
                t = _now()
                ids = self.tokenizer.encode(text, add_special_tokens)
                _record("tokenize_run", _now() - t)
                return ids
            marks = {}

            def run():
                marks["start"] = _now()
                ids = self.tokenizer.encode(text, add_special_tokens, release_gil=False)
                marks["end"] = _now()
                return ids

            t0 = _now()
            ids = await asyncio.get_running_loop().run_in_executor(self._tokenize_pool, run)
            t3 = _now()
            _record("tokenize_queue", marks["start"] - t0)
            _record("tokenize_run", marks["end"] - marks["start"])
            _record("tokenize_return", t3 - marks["end"])
            return ids

        cls.add_request = timed_add_request
        if os.environ.get("FRONTEND_KEEP_ENCODE") != "1":
            cls.encode = timed_encode

    def _patch_app(mod):
        build_app = mod.build_app

        def traced_build_app(*args, **kwargs):
            app = build_app(*args, **kwargs)

            async def traced(scope, receive, send):
                if scope["type"] == "http":
                    _arrival.set(_now())
                await app(scope, receive, send)

            return traced

        mod.build_app = traced_build_app

    _PATCHES = {"mtpserve.server.async_engine": _patch_async_engine, "mtpserve.server.app": _patch_app}

    class _PatchOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in _PATCHES:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            loader = spec.loader
            exec_module = loader.exec_module

            def patched_exec(module):
                exec_module(module)
                _PATCHES[name](module)

            loader.exec_module = patched_exec
            return spec

    import importlib.util
    sys.meta_path.insert(0, _PatchOnImport())
