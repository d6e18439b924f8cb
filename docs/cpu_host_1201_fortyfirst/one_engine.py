"""One engine of retired.py, run long, for perf: python one.py k0|adaptive ROUNDS"""
import sys
sys.argv = [sys.argv[0], sys.argv[1], sys.argv[2]]
exec(open("docs/cpu_host_1201_fortyfirst/retired.py").read().split("for rnd in range")[0])
name, rounds = sys.argv[1], int(sys.argv[2])
llm = LLM(str(model), **base, **configs[name])
tag = name if name == "k0" else "a"
for r in range(rounds):
    batch(llm, f"{tag}{r}_", N)
print(llm.stats().steps, llm.stats().spec.retired)
llm.shutdown()
