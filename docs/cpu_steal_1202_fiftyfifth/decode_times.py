"""One offline engine on this CPU (the embedded model in its default dtype, k = 0, greedy) decoding batches of 4
requests x 64 tokens back to back for argv[1] seconds: a line `wall-clock  ms-a-step` per generate call."""
import sys
import time

from mtpserve import LLM, SamplingParams

PROMPTS = ["What is the capital of France?", "Write a short poem about the sea.", "Why is the sky blue?",
           "Explain how a transformer works."]
TOKENS = 64

llm = LLM(devices="cpu", num_speculative_tokens=0)
llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
params = SamplingParams(temperature=0, max_tokens=TOKENS, ignore_eos=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    start = time.time()
    llm.generate(PROMPTS, params)
    print(f"{time.time():.3f} {(time.time() - start) * 1e3 / TOKENS:.3f}", flush=True)
