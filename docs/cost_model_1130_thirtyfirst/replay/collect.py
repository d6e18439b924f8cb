"""Scratch: per-step cost samples of fixed k=1..3 and adaptive engines, interleaved per repeat."""
import sys, os
os.environ["MTP_COST_TRACE"] = "1"
from mtpserve import LLM, SamplingParams
sys.path.insert(0, "scripts")
from bench_offline import PROMPTS
batches = [int(b) for b in sys.argv[1].split(",")]
repeats = int(sys.argv[2])
methods = [(1, "fixed"), (2, "fixed"), (3, "fixed"), (3, "adaptive")]
llms = {m: LLM(None, devices="cpu", dtype="float32", num_speculative_tokens=m[0], speculative_policy=m[1],
               max_cache_blocks=512) for m in methods}
for b in batches:
    for r in range(repeats):
        for i in range(len(methods)):
            m = methods[(i + r) % len(methods)]
            llm = llms[m]
            llm.chat([[{"role": "user", "content": PROMPTS[0]}]], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
            print(f"M {m[0]} {m[1]} {b} {r}", file=sys.stderr, flush=True)
            llm.chat([[{"role": "user", "content": PROMPTS[j % len(PROMPTS)]}] for j in range(b)],
                     SamplingParams(temperature=0, max_tokens=128, ignore_eos=True))
            print("E", file=sys.stderr, flush=True)
for l in llms.values(): l.shutdown()
