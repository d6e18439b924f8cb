"""Mean TPOT by output length, fixed k = 3 against k = 1 in one round of the c = 64 sweep (requests.csv), and the
token-weighted TPOT (sum of (latency - TTFT) over sum of (tokens - 1)).  python3 by_length.py [r1|r0]"""
import csv, statistics as st, sys
rnd = sys.argv[1] if len(sys.argv) > 1 else "r1"
runs = {}
for row in csv.DictReader(open("requests.csv")):
    runs.setdefault(row["run"], {})[row["source_id"]] = row
a, b = runs[f"MTP_k3_c64_{rnd}"], runs[f"MTP_k1_c64_{rnd}"]
f = lambda r, key: float(r[key])
def weighted(x, ids):
    return sum(f(x[i], "latency_ms") - f(x[i], "ttft_ms") for i in ids) / sum(f(x[i], "output_tokens") - 1 for i in ids)
ids = [i for i in a if i in b]
print(f"all {len(ids)}: mean TPOT k=3 {st.mean(f(a[i], 'tpot_ms') for i in ids):.2f} k=1 {st.mean(f(b[i], 'tpot_ms') for i in ids):.2f}; "
      f"token-weighted {weighted(a, ids):.2f} {weighted(b, ids):.2f}")
for lo, hi in [(0, 16), (16, 32), (32, 64), (64, 128), (128, 300), (300, 2000)]:
    s = [i for i in ids if lo <= f(a[i], "output_tokens") < hi]
    print(f"{lo}-{hi} tokens, {len(s)} requests: mean TPOT k=3 {st.mean(f(a[i], 'tpot_ms') for i in s):.2f} "
          f"k=1 {st.mean(f(b[i], 'tpot_ms') for i in s):.2f}")
