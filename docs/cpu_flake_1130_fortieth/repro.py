"""The planned-ahead half of tests/test_adaptive_speculation.py's always-accepted test, repeated: a 40-token warm-up
request and a 220-token request whose drafts are all accepted, on a fresh engine each run; prints each run's steps
by k. A run where k = 0 steps outnumber the others is what failed on CI.
    .venv/bin/python docs/cpu_flake_1130_fortieth/repro.py RUNS [TARGET_LAYERS (3)]
Beside two busy loops (`for j in 1 2; do timeout 500 sh -c 'while :; do :; done' & done`) for the loaded case."""
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from conftest import write_tiny_model  # noqa: E402
from mtpserve import LLM  # noqa: E402
from mtpserve.sampling_params import SamplingParams  # noqa: E402
from test_mtp import BASE, BATCHES, run_with_drafts, tokens  # noqa: E402

runs = int(sys.argv[1])
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 3
model = write_tiny_model(pathlib.Path(tempfile.mkdtemp()), num_hidden_layers=layers)
prompt = BATCHES[1][0]
params = SamplingParams(temperature=0, max_tokens=220, ignore_eos=True)
plain = LLM(str(model), **BASE)
expected = tokens(plain.generate([prompt], params))[0]
plain.shutdown()
for run in range(runs):
    llm = LLM(str(model), **BASE, plan_ahead=True, deferred_fill_positions=0, num_speculative_tokens=3,
              speculative_policy="adaptive")
    run_with_drafts(llm, prompt, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True), expected)
    before = list(llm.stats().spec.steps_by_k)
    got, _ = run_with_drafts(llm, prompt, params, expected)
    steps = [a - b for a, b in zip(llm.stats().spec.steps_by_k, before)]
    print(run, "steps by k", steps, "exact" if got == expected else "NOT EXACT", flush=True)
    llm.shutdown()
