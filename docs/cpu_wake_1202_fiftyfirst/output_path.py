"""What an engine output costs on its way to an API-server process, per output, on this CPU. 64 requests of 64
tokens (temperature 1.5) run to the end unread; then the engine process's output thread takes all their outputs at
once, the way it did before (get_outputs, each C++ output read field by field into a SimpleNamespace: `plain_output`
below, engine_link's before this session) and the way it does now (get_output_states: plain tuples built in C++),
and pickles them; an API server unpickles them and reads what the output processor reads.
    .venv/bin/python docs/cpu_wake_1202_fiftyfirst/output_path.py K      (K = num_speculative_tokens: 0 or 3)"""
import pickle
import sys
import time
from types import SimpleNamespace

from mtpserve import LLM
from mtpserve.engine_link import engine_outputs
from mtpserve.sampling_params import SamplingParams

REQUESTS, TOKENS = 64, 64


def plain_spec(spec):
    return SimpleNamespace(drafts=spec.drafts, draft_tokens=spec.draft_tokens, accepted_tokens=spec.accepted_tokens,
                           accepted_per_position=list(spec.accepted_per_position), steps_by_k=list(spec.steps_by_k),
                           retired=spec.retired)


def plain_output(out):
    lp = lambda e: SimpleNamespace(token=e.token, logprob=e.logprob, rank=e.rank, top=list(e.top))  # noqa: E731
    return SimpleNamespace(
        request_id=out.request_id, token_ids=list(out.token_ids), logprobs=[lp(e) for e in out.logprobs],
        prompt_logprobs=[lp(e) for e in out.prompt_logprobs], finished=out.finished,
        finish_reason=out.finish_reason, stop_token=out.stop_token, error=out.error,
        num_prompt_tokens=out.num_prompt_tokens, num_cached_tokens=out.num_cached_tokens,
        spec=plain_spec(out.spec))


def read(o):
    """What the output processor reads of an output."""
    return (o.request_id, list(o.token_ids), o.logprobs, o.finished, o.num_cached_tokens, o.spec.drafts,
            o.spec.draft_tokens, o.spec.accepted_tokens, list(o.spec.accepted_per_position), list(o.spec.steps_by_k),
            o.spec.retired, o.error, o.finish_reason, o.stop_token, o.prompt_logprobs, o.num_prompt_tokens)


def finished_run(llm):
    """Runs the requests to their end without reading their outputs."""
    params = SamplingParams(temperature=1.5, max_tokens=TOKENS, ignore_eos=True).to_cpp()
    target = llm.stats().generation_tokens + REQUESTS * TOKENS
    llm.core.engine.add_requests([(f"r{i}", [5 + (i * 37 + j * 11) % 4000 for j in range(40)], params)
                                  for i in range(REQUESTS)])
    while llm.stats().generation_tokens < target:
        time.sleep(0.05)


def timed(f):
    start = time.perf_counter()
    result = f()
    return time.perf_counter() - start, result


def one_way(llm, before: bool) -> tuple[list, dict]:
    finished_run(llm)
    take = (lambda: [plain_output(o) for o in llm.core.engine.get_outputs(0.0)]) if before else \
        (lambda: llm.core.engine.get_output_states(0.0))
    seconds, outs = timed(take)
    dumps, blob = timed(lambda: pickle.dumps(outs))
    loads, back = timed(lambda: pickle.loads(blob))
    wrap, back = (0.0, back) if before else timed(lambda: engine_outputs(back))
    reads, values = timed(lambda: [read(o) for o in back])
    n = len(outs)
    return values, {"engine process": 1e6 * (seconds + dumps) / n, "API server": 1e6 * (loads + wrap + reads) / n,
                    "bytes": len(blob) / n, "outputs": n}


k = int(sys.argv[1])
llm = LLM(num_speculative_tokens=k, dtype="float32")
for round_ in range(3):
    for before in (True, False):
        values, cost = one_way(llm, before)
        assert len(values) == cost["outputs"]
        print(f"k = {k}, round {round_}, {'before' if before else 'now'}: " +
              ", ".join(f"{name} {value:.2f}" for name, value in cost.items() if name != "outputs") +
              f" (us an output; {cost['outputs']} outputs)")
llm.shutdown()
