"""Engines built once in one process and timed in turn on bench_offline.py's greedy cell (the embedded model,
float32, this CPU, 128 tokens), the order reversed every other round, with each run's CPU time and context switches
(2026-12-01, forty-fourth session), from the repository root:
  .venv/bin/python docs/cpu_host_1201_fortyfourth/pair.py ROUNDS BATCH NAME='{"num_speculative_tokens": 3}' ...
Each further argument names an engine and gives its LLM arguments as JSON; "_env" sets environment variables while
it is built (MTPX_SKIP_DRAFT=1 with trace_and_skip.diff applied: an engine that never drafts or fills), and
"_with_mtp": true loads the MTP layer (and its cache) into a k = 0 engine that never uses it."""
import json, os, resource, statistics, sys, time
from mtpserve import LLM
sys.path.insert(0, "scripts")
from bench_offline import run

rounds, batch = int(sys.argv[1]), int(sys.argv[2])
specs = [a.split("=", 1) for a in sys.argv[3:]]


def build(j):
    args = json.loads(j)
    env = args.pop("_env", {})
    os.environ.update(env)
    import mtpserve.engine as me
    original = me.load_model
    if args.pop("_with_mtp", False):  # k = 0 with the MTP layer's weights (and its cache) loaded, unused
        me.load_model = lambda *a, **kw: original(*a, **{**kw, "with_mtp": True})
    llm = LLM(None, devices="cpu", dtype="float32", max_cache_blocks=512, **args)
    me.load_model = original
    for k in env:
        del os.environ[k]
    return llm
llms = [build(j) for _, j in specs]
rows = [[] for _ in specs]
for r in range(rounds):
    order = range(len(specs)) if r % 2 == 0 else reversed(range(len(specs)))
    for i in order:
        u0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
        res = run(llms[i], batch, 128, 0.0)
        u1 = resource.getrusage(resource.RUSAGE_SELF); wall = time.perf_counter() - t0
        row = dict(tpot=res["tpot_ms"], target=res["target_ms_per_step"], step=res["step_ms_per_step"],
                   cpu=(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime) / wall,
                   sys=(u1.ru_stime - u0.ru_stime) / wall,
                   vcs=u1.ru_nvcsw - u0.ru_nvcsw, ivcs=u1.ru_nivcsw - u0.ru_nivcsw, k=res["steps_by_k"])
        rows[i].append(row)
        print(f"r{r} {specs[i][0]}: " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in row.items()), flush=True)
for i, (name, _) in enumerate(specs):
    med = {k: statistics.median(x[k] for x in rows[i]) for k in ("tpot", "target", "step", "cpu", "sys", "vcs", "ivcs")}
    print(name, " ".join(f"{k}={v:.3f}" for k, v in med.items()))
for i in range(1, len(specs)):
    print(f"{specs[0][0]}/{specs[i][0]} TPOT paired median",
          round(statistics.median(a["tpot"] / b["tpot"] for a, b in zip(rows[0], rows[i])), 4),
          "target paired", round(statistics.median(a["target"] / b["target"] for a, b in zip(rows[0], rows[i])), 4))
for l in llms:
    l.shutdown()
