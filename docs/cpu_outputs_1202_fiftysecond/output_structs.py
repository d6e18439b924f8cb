"""What an engine output costs on its way to the frontend on this CPU, on the build at hand: main before the
fifty-second session's change (`get_outputs` gave bound C++ objects; the API servers made named tuples of
`get_output_states`' plain tuples in Python, engine_link.engine_outputs) or after it (`get_outputs` gives struct
sequences, and `_C.request_outputs` makes the same structs of the tuples). Modes:
  stream     the engine process's output thread with API servers in other processes: it takes each step's outputs
             of 32 requests (64 tokens, temperature 1.5) as tuples and pickles them; its CPU time (time.thread_time)
             an output (the same code both ways: a control)
  inprocess  the outputs read where they are taken (one API server, the offline LLM), as `stream` takes them: bound
             objects before, struct sequences after
  server     an API server's side: all the outputs of 64 finished requests, pickled once, then unpickled, made
             readable and read 20 times, garbage collection off; CPU time an output, and pickled bytes an output
    .venv/bin/python docs/cpu_outputs_1202_fiftysecond/output_structs.py MODE K ROUNDS      (K: 0 or 3)"""
import gc
import pickle
import sys
import time

from mtpserve import LLM, _C
from mtpserve.sampling_params import SamplingParams

TOKENS = 64


def read(o):
    """What the output processor reads of an output."""
    return (o.request_id, list(o.token_ids), o.logprobs, o.finished, o.num_cached_tokens, o.spec.drafts,
            o.spec.draft_tokens, o.spec.accepted_tokens, list(o.spec.accepted_per_position), list(o.spec.steps_by_k),
            o.spec.retired, o.error, o.finish_reason, o.stop_token, o.prompt_logprobs, o.num_prompt_tokens)


def submit(llm, requests: int, tag: str) -> None:
    params = SamplingParams(temperature=1.5, max_tokens=TOKENS, ignore_eos=True).to_cpp()
    llm.core.engine.add_requests([(f"{tag}{i}", [5 + (i * 37 + j * 11) % 4000 for j in range(40)], params)
                                  for i in range(requests)])


def streamed(llm, tag: str, take) -> float:
    """The reader's CPU time an output while it takes each step's outputs of 32 requests with take()."""
    submit(llm, 32, tag)
    done, n, cpu = 0, 0, time.thread_time()
    while done < 32:
        outs = take(llm.core.engine)
        done += sum(o[4] for o in outs)  # `finished`, fifth in every form
        n += len(outs)
    return 1e6 * (time.thread_time() - cpu) / n


def take_and_pickle(engine):
    outs = engine.get_output_states(0.1)
    pickle.dumps(outs)
    return outs


def take_and_read(engine):
    outs = engine.get_outputs(0.1)
    for o in outs:
        read(o)
    return [(None, None, None, None, o.finished) for o in outs]


def server_side(llm, tag: str) -> str:
    target = llm.stats().generation_tokens + 64 * TOKENS
    submit(llm, 64, tag)
    while llm.stats().generation_tokens < target:
        time.sleep(0.05)
    blob = pickle.dumps(llm.core.engine.get_output_states(0.0))
    gc.disable()
    cpu, n = time.thread_time(), 0
    for _ in range(20):
        back = pickle.loads(blob)
        for o in engine_outputs(back) if BEFORE else _C.request_outputs(back):
            read(o)
        n += len(back)
    cpu = time.thread_time() - cpu
    gc.enable()
    return f"{1e6 * cpu / n:.2f} us an output, {len(blob) / len(back):.1f} bytes an output"


mode, k, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llm = LLM(num_speculative_tokens=k, dtype="float32")
BEFORE = not hasattr(_C, "request_outputs")
if BEFORE:
    from mtpserve.engine_link import engine_outputs
for round_ in range(rounds):
    tag = f"{round_}-"
    cost = {"stream": lambda: f"{streamed(llm, tag, take_and_pickle):.2f} us an output",
            "inprocess": lambda: f"{streamed(llm, tag, take_and_read):.2f} us an output",
            "server": lambda: server_side(llm, tag)}[mode]()
    print(f"{'before' if BEFORE else 'after'}, {mode}, k = {k}, round {round_}: {cost}", flush=True)
llm.shutdown()
