#!/usr/bin/env python3
"""Idle RSS of an in-process AsyncEngine over rounds of 200 streams (64 at a time), with the
Python heap traced: issue 17 item 11 (docs/reliability.md).

    python scripts/chaos/rss_inproc.py x "dict(max_cache_blocks=4096)"   (run from the repository root;
    set ONEDNN_PRIMITIVE_CACHE_CAPACITY / MALLOC_MMAP_THRESHOLD_ in the environment to compare)"""
import asyncio, gc, os, sys, time, tracemalloc
from pathlib import Path
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.async_engine import AsyncEngine

def rss():
    for l in Path("/proc/self/status").read_text().splitlines():
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
mode = sys.argv[1]
args = EngineArgs(model=str(Path("models/tiny-dsv3-mtp").resolve()), num_speculative_tokens=1, **eval(sys.argv[2]))
core = EngineCore(args)
print("num_blocks", core.num_blocks, "block_size", args.block_size, "max_model_len", core.max_model_len, flush=True)
eng = AsyncEngine(core)
tracemalloc.start()
async def one(i):
    ids = eng.tokenizer.encode("the quick brown fox " * (1 + i % 5))
    async for d in eng.generate(ids, SamplingParams(max_tokens=64, ignore_eos=True, temperature=0.8, seed=i)):
        pass
async def rnd(n, base):
    sem = asyncio.Semaphore(64)
    async def g(i):
        async with sem: await one(base + i)
    await asyncio.gather(*(g(i) for i in range(n)))
print("start", rss(), flush=True)
t0 = time.time()
for r in range(3):
    asyncio.run(rnd(200, r * 1000))
    gc.collect()
    cur, peak = tracemalloc.get_traced_memory()
    print("round", r + 1, "rss_mb", rss(), "py_traced_mb", round(cur / 2**20, 1), "s", round(time.time() - t0, 1), flush=True)
eng.shutdown()
