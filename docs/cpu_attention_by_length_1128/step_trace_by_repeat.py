"""Per repeat of a one-concurrency sweep, from step traces that carry a wall-clock timestamp (a 10th column: the
trace patch plus `std::chrono::system_clock` seconds): each server's steps split where it idled over 2 s (the other
methods' turns). Prints, per repeat, the steps at batch B and step k (k = 0's server: all its steps at batch B), their
mean step and target ms, and the repeat's decode-only ms per emitted token.

  python3 step_trace_by_repeat.py TRACE_PREFIX B K
"""
import sys, glob, statistics as st
names = ["k0", "k1", "k2", "k3", "adaptive"]
b, k = int(sys.argv[2]), int(sys.argv[3])
runs = {}
for name, path in zip(names, sorted(glob.glob(sys.argv[1] + "*"), key=lambda p: int(p.rsplit(".", 1)[1]))):
    steps = [tuple(float(x) for x in l.split()) for l in open(path)]
    cur, rs = [], []
    for s in steps:
        if cur and s[9] - cur[-1][9] > 2.0:
            rs.append(cur); cur = []
        cur.append(s)
    rs.append(cur)
    runs[name] = rs
for name in names:
    out = []
    for r in runs[name]:
        g = [s for s in r if s[0] == 1 and int(s[1]) == b and (int(s[2]) == k or (name == "k0"))]
        dec = [s for s in r if s[0] == 1]
        tok = sum(s[5] for s in dec)
        out.append(f"[t0 {r[0][9]%10000:.0f}: {len(g)} st, step {1e3*st.mean(s[7] for s in g) if g else 0:.1f} ms, target {1e3*st.mean(s[6] for s in g) if g else 0:.1f}; decode {1e3*sum(s[7] for s in dec)/tok:.2f} ms/tok]")
    print(name, " ".join(out))
