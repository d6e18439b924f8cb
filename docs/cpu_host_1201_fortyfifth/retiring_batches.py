"""Where the fills of an adaptive engine whose sequences all retire come from: batches of retired.py's 80 requests
(drafts forced wrong, plan_ahead, a fill every step) on one engine, the first its warm-up, the requests added one at a
time (as retired.py adds them) or all at once (`add_requests`: the next step sees them all), alternating. From the
repository root: .venv/bin/python docs/cpu_host_1201_fortyfifth/retiring_batches.py [cpu]
(cpu: the engine's CPU defaults instead, no planning ahead and deferred fills; each line then ends in the batch's
sequences retired and its MTP device time)"""
import sys
sys.path.insert(0, "tests")
exec(open("docs/cpu_host_1201_fortyfirst/retired.py").read().split("for rnd in range")[0])


def batch_at_once(llm, tag, n):
    engine = llm.core.engine
    ids = [f"{tag}{i}" for i in range(n)]
    for rid in ids:
        engine.override_drafts(rid, wrong)
    engine.add_requests([(rid, prompts[i], params.to_cpp()) for i, rid in enumerate(ids)])
    done = set()
    while len(done) < n:
        done |= {o.request_id for o in engine.get_outputs(1.0) if o.finished}


cpu_defaults = dict(num_speculative_tokens=3, speculative_policy="adaptive")
llm = LLM(str(model), **base, **(cpu_defaults if sys.argv[1:] == ["cpu"] else configs["adaptive"]))
for r in range(7):
    how = "one at a time" if r % 2 == 0 else "all at once"
    s0 = llm.stats()
    (batch if r % 2 == 0 else batch_at_once)(llm, f"a{r}_", N)
    s = llm.stats()
    d = lambda f: getattr(s, f) - getattr(s0, f)  # noqa: E731
    print(r, how, "steps", d("steps"), "fill_skipped", d("fill_skipped_steps"),
          "draft ms", round(d("draft_seconds") * 1e3, 2), "retired", s.spec.retired - s0.spec.retired,
          "by k", [a - b for a, b in zip(s.spec.steps_by_k, s0.spec.steps_by_k)], "drafts", s.spec.drafts - s0.spec.drafts,
          flush=True)
llm.shutdown()
