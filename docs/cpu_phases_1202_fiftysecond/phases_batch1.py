"""Host phases of Engine::step on this CPU at temperature 1.5, where adaptive retires its requests, with
docs/gpu/sweep_1202_fiftysecond/phases_every.patch applied and built (it prints every 2,000 decode steps):
    git apply docs/gpu/sweep_1202_fiftysecond/phases_every.patch && .venv/bin/pip install --no-build-isolation -e .
    .venv/bin/python docs/cpu_phases_1202_fiftysecond/phases_batch1.py K POLICY BATCH GENERATES
(phases_batch1.txt: 0 fixed 1 4, then 3 adaptive 1 4, twice.) Phases as in docs/cpu_wake_1202_fiftyfirst/phases.py:
0 schedule, 1 build the step input, 2 target forward, 3 prompt logprobs and plan ahead, 4 sample, 5 count the step's
k, 6 apply the samples, 7 draft (or skip drafting), 8 commit blocks, 9 step stats, 10 publish (12 stats, 13 outbox
lock, 14 push, 15 notify the reader), 11 record the step's cost."""
import sys

from mtpserve import LLM, SamplingParams

k, policy, batch, generates = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
llm = LLM(num_speculative_tokens=k, speculative_policy=policy, dtype="float32")
for g in range(generates):
    llm.generate([[5 + (i * 37 + g) % 4000, 6, 7] for i in range(batch)],
                 SamplingParams(temperature=1.5, max_tokens=1000, ignore_eos=True))
llm.shutdown()
