"""Host time per decode step where every sequence has retired its drafts, against a k = 0 engine: 80 greedy
requests whose drafts are forced wrong (so they retire), every step filling (a GPU's mode); one process, the tiny
model on this CPU. Prints per step: the step, the target forward, sampling, and the rest (host work)."""
import pathlib, sys, tempfile, time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from conftest import write_tiny_model
from mtpserve import LLM
from mtpserve.sampling_params import SamplingParams

model = write_tiny_model(pathlib.Path(tempfile.mkdtemp()))
N, T = 80, 192
prompts = [[(7 * i + j) % 500 + 3 for j in range(16)] for i in range(N)]
params = SamplingParams(temperature=0, max_tokens=T, ignore_eos=True)
base = dict(dtype="float32", block_size=8, max_cache_blocks=8192)
configs = {"k0": dict(num_speculative_tokens=0),
           "adaptive": dict(num_speculative_tokens=3, speculative_policy="adaptive", plan_ahead=True,
                            deferred_fill_positions=0)}
wrong = [(t * 31 + 5) % 512 for t in range(T + 16)]


def batch(llm, tag, n):
    engine = llm.core.engine
    ids = [f"{tag}{i}" for i in range(n)]
    for i, rid in enumerate(ids):
        if tag != "k0":
            engine.override_drafts(rid, wrong)
        engine.add_request(rid, prompts[i], params.to_cpp())
    done = set()
    while len(done) < n:
        done |= {o.request_id for o in engine.get_outputs(1.0) if o.finished}


for rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for name, extra in configs.items():
        llm = LLM(str(model), **base, **extra)
        tag = name if name == "k0" else "a"
        batch(llm, tag + "w", N)  # warm-up: the class learns its drafts fail
        s0 = llm.stats()
        batch(llm, tag + "m", N)
        s = llm.stats()
        d = lambda f: getattr(s, f) - getattr(s0, f)
        steps = d("steps")
        print(f"{rnd} {name:9s} steps {steps} step {d('step_seconds') / steps * 1e3:.3f} ms"
              f" target {d('target_seconds') / steps * 1e3:.3f} sample {d('sample_seconds') / steps * 1e3:.3f}"
              f" rest {(d('step_seconds') - d('target_seconds') - d('sample_seconds')) / steps * 1e3:.4f}"
              f" retired {s.spec.retired - s0.spec.retired}"
              f" by k {[a - b for a, b in zip(s.spec.steps_by_k, s0.spec.steps_by_k)]}", flush=True)
        llm.shutdown()
