"""This CPU's greedy offline grid, forty-fifth session: per run of `bash docs/cpu_host_1201_fortyfourth/grid.sh 4 OUT`
(bench_offline.py, k = 0, fixed k = 1..3, adaptive k_max 3, batch 1 / 8 / 32 / 64, 3 repeats; df555fb's engine, whose
b78b160 change is off on a CPU), adaptive's TPOT speedup over k = 0 and over the best fixed k by TPOT, and its steps by
k: .venv/bin/python docs/cpu_host_1201_fortyfifth/analyse_grid.py docs/cpu_host_1201_fortyfifth/grid/G_r*.json"""
import json, sys
for f in sys.argv[1:]:
    rs = json.load(open(f))["results"]
    out = []
    for b in sorted({r["batch"] for r in rs}):
        cell = [r for r in rs if r["batch"] == b]
        k0 = next(r for r in cell if r["k"] == 0)
        ad = next(r for r in cell if r["policy"] == "adaptive")
        fixed = [r for r in cell if r["policy"] == "fixed" and r["k"] > 0]
        best = min(fixed, key=lambda r: r["tpot_ms"]) if fixed else None
        s = f"b{b}: vs k0 {k0['tpot_ms'] / ad['tpot_ms']:.3f}"
        if best:
            s += f", vs k{best['k']} {best['tpot_ms'] / ad['tpot_ms']:.3f}"
        out.append(s + f" [{'/'.join(str(x) for x in ad['steps_by_k'])}]")
    print(f.split('/')[-1], " | ".join(out))
