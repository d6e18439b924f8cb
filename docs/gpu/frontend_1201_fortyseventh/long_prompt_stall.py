"""How long one stream stalls while other clients send very long prompts (run against a server on URL):
a greedy stream of 256 tokens runs while STALLERS requests of CHARS characters each are posted (refused as too long
once tokenized); prints the stream's largest gaps between chunks, with and without the long prompts beside it.
  python long_prompt_stall.py http://127.0.0.1:8123 [CHARS] [STALLERS]"""
import asyncio
import sys
import time

import httpx

URL = sys.argv[1]
CHARS = int(sys.argv[2]) if len(sys.argv) > 2 else 400_000
STALLERS = int(sys.argv[3]) if len(sys.argv) > 3 else 8


async def stream_gaps(client: httpx.AsyncClient) -> list[float]:
    body = {"prompt": "the quick brown fox", "max_tokens": 256, "temperature": 0, "ignore_eos": True, "stream": True}
    times = []
    async with client.stream("POST", URL + "/v1/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                times.append(time.perf_counter())
    return sorted((b - a for a, b in zip(times, times[1:])), reverse=True)


async def long_prompts(client: httpx.AsyncClient) -> list[int]:
    text = ("lorem ipsum dolor sit amet " * (CHARS // 27 + 1))[:CHARS]
    codes = []
    for _ in range(STALLERS):
        await asyncio.sleep(0.3)
        resp = await client.post(URL + "/v1/completions", json={"prompt": text, "max_tokens": 1})
        codes.append(resp.status_code)
    return codes


async def main() -> None:
    async with httpx.AsyncClient(timeout=300) as client:
        alone = await stream_gaps(client)
        beside, codes = await asyncio.gather(stream_gaps(client), long_prompts(client))
    ms = lambda gaps: " ".join(f"{1e3 * g:.1f}" for g in gaps[:6])
    print(f"largest gaps (ms), stream alone: {ms(alone)}")
    print(f"largest gaps (ms), beside {STALLERS} prompts of {CHARS} characters (HTTP {sorted(set(codes))}): "
          f"{ms(beside)}")


asyncio.run(main())
