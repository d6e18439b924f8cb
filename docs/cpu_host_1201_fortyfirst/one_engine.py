"""One engine of retired.py, run long (for perf or a probe build), from the repository root:
    .venv/bin/python docs/cpu_host_1201_fortyfirst/one_engine.py k0|adaptive ROUNDS"""
import sys
exec(open("docs/cpu_host_1201_fortyfirst/retired.py").read().split("for rnd in range")[0])
name, rounds = sys.argv[1], int(sys.argv[2])
llm = LLM(str(model), **base, **configs[name])
tag = name if name == "k0" else "a"
for r in range(rounds):
    batch(llm, f"{tag}{r}_", N)
print(llm.stats().steps, llm.stats().spec.retired)
llm.shutdown()
