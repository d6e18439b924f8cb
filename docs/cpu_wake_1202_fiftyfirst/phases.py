"""Host time of each phase of Engine::step on this CPU, at temperature 1.5 (adaptive retires every sequence, so both
engines do k = 0's work). Needs phases.patch applied and built (it prints the phases' means at exit):
    git apply docs/cpu_wake_1202_fiftyfirst/phases.patch && .venv/bin/pip install --no-build-isolation -e .
    .venv/bin/python docs/cpu_wake_1202_fiftyfirst/phases.py K POLICY BATCH      (e.g. 0 fixed 32, 3 adaptive 32)
Phases: 0 schedule, 1 build the step input, 2 target forward, 3 prompt logprobs and plan ahead, 4 sample, 5 count
the step's k, 6 apply the samples, 7 draft (or skip drafting), 8 commit blocks, 9 step stats, 10 publish (of which 12
stats, 13 take the outbox lock, 14 push, 15 notify the reader), 11 record the step's cost. phases.txt was measured
on f6167a7's engine, with the same instrumentation (the patch now applies to the engine as it is since the drafting
moved to engine_drafting.cpp)."""
import sys

from mtpserve import LLM, SamplingParams

k, policy, batch = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
llm = LLM(num_speculative_tokens=k, speculative_policy=policy, dtype="float32")
prompts = [[5 + (i * 37 + j * 11) % 4000 for j in range(40 + i % 17)] for i in range(batch)]
params = SamplingParams(temperature=1.5, max_tokens=128, ignore_eos=True)
for _ in range(4):
    llm.generate(prompts, params)
spec = llm.stats().spec
print("steps_by_k", list(spec.steps_by_k), "drafts", spec.drafts, "draft_tokens", spec.draft_tokens, "accepted",
      spec.accepted_tokens, "retired", spec.retired, "fill_skipped", llm.stats().fill_skipped_steps, file=sys.stderr)
