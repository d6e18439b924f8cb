"""One offline engine decoding for argv[1] seconds: the embedded model in bf16 on cuda:0, k = 0, greedy, generate
calls of 4 requests x 400 tokens back to back (its PHASES lines go to stderr)."""
import sys
import time

from mtpserve import LLM, SamplingParams

PROMPTS = ["What is the capital of France?", "Write a short poem about the sea.", "Why is the sky blue?",
           "Explain how a transformer works."]

llm = LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=0)
llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
params = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
end, calls = time.time() + float(sys.argv[1]), 0
while time.time() < end:
    llm.generate(PROMPTS, params)
    calls += 1
print(f"generate calls: {calls}", file=sys.stderr)
