"""What an engine output costs on its way to the frontend, per output, on this CPU, three rounds of each way:
  stream      the engine process's output thread as it runs with API servers in other processes: it takes each
              step's outputs of 32 requests (64 tokens, temperature 1.5) and pickles them, the way it did before this
              session (get_outputs, each C++ output read field by field into a SimpleNamespace: `plain_output`
              below, engine_link's until then) and the way it does now (get_output_states: plain tuples built in
              C++); its CPU time (time.thread_time) over the outputs
  bulk        64 requests run to their end unread, then all their outputs taken at once, both ways, pickled, and on
              an API server's side unpickled and read as the output processor reads them
  inprocess   as `stream`, for the one-process paths (one API server, the offline LLM), which read the C++ objects
              without pickling: those against the tuples read as engine_link.EngineOutput
    .venv/bin/python docs/cpu_wake_1202_fiftyfirst/output_path.py MODE K      (K = num_speculative_tokens: 0 or 3)"""
import pickle
import sys
import time
from types import SimpleNamespace

from mtpserve import LLM
from mtpserve.engine_link import engine_outputs
from mtpserve.sampling_params import SamplingParams

TOKENS = 64


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


def submit(llm, requests: int, tag: str) -> None:
    params = SamplingParams(temperature=1.5, max_tokens=TOKENS, ignore_eos=True).to_cpp()
    llm.core.engine.add_requests([(f"{tag}{i}", [5 + (i * 37 + j * 11) % 4000 for j in range(40)], params)
                                  for i in range(requests)])


def streamed(llm, now: bool, tag: str, take) -> dict:
    """The reader's CPU time an output while it takes each step's outputs of 32 requests with take(now)."""
    submit(llm, 32, tag)
    done, n, cpu = 0, 0, time.thread_time()
    while done < 32:
        outs, finished = take(llm.core.engine, now)
        done += finished
        n += len(outs)
    return {"us an output": 1e6 * (time.thread_time() - cpu) / n, "outputs": n}


def take_and_pickle(engine, now: bool):
    if now:
        outs = engine.get_output_states(0.1)
        finished = sum(state[4] for state in outs)
    else:
        outs = [plain_output(o) for o in engine.get_outputs(0.1)]
        finished = sum(o.finished for o in outs)
    pickle.dumps(outs)
    return outs, finished


def take_and_read(engine, now: bool):
    outs = engine_outputs(engine.get_output_states(0.1)) if now else engine.get_outputs(0.1)
    for o in outs:
        read(o)
    return outs, sum(o.finished for o in outs)


def bulk(llm, now: bool, tag: str) -> dict:
    """Both sides' time an output for all the outputs of 64 finished requests, taken at once."""
    target = llm.stats().generation_tokens + 64 * TOKENS
    submit(llm, 64, tag)
    while llm.stats().generation_tokens < target:
        time.sleep(0.05)
    start = time.perf_counter()
    outs = llm.core.engine.get_output_states(0.0) if now else [plain_output(o) for o in llm.core.engine.get_outputs(0.0)]
    blob = pickle.dumps(outs)
    sent = time.perf_counter()
    back = pickle.loads(blob)
    for o in engine_outputs(back) if now else back:
        read(o)
    n = len(outs)
    return {"engine process": 1e6 * (sent - start) / n, "API server": 1e6 * (time.perf_counter() - sent) / n,
            "bytes": len(blob) / n, "outputs": n}


mode, k = sys.argv[1], int(sys.argv[2])
llm = LLM(num_speculative_tokens=k, dtype="float32")
for round_ in range(3):
    for now in (False, True):
        tag = f"{round_}{now}-"
        cost = {"stream": lambda: streamed(llm, now, tag, take_and_pickle), "bulk": lambda: bulk(llm, now, tag),
                "inprocess": lambda: streamed(llm, now, tag, take_and_read)}[mode]()
        print(f"{mode}, k = {k}, round {round_}, {'now' if now else 'before'}: " +
              ", ".join(f"{name} {value:.2f}" for name, value in cost.items() if name != "outputs") +
              f" ({cost['outputs']} outputs)")
llm.shutdown()
