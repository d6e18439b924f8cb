"""Sums the per-step lines that step_trace.patch makes a server write ($MTPSERVE_STEP_TRACE.<pid>), by step k.

Columns of a line: decode-only step (1) or a step with prompt tokens (0); sequences; the step's k (-1: no MTP);
rows fed to the target; context tokens summed over the sequences (0 without MTP); tokens emitted (the column the
patch calls maxctx); target forward seconds; whole step seconds; drafting seconds.

  python3 step_trace.py TRACE_PREFIX
"""
import collections
import glob
import statistics as st
import sys

for path in sorted(glob.glob(sys.argv[1] + "*")):
    steps = [tuple(float(x) for x in line.split()) for line in open(path)]
    decode = [s for s in steps if s[0] == 1]
    prompt = [s for s in steps if s[0] == 0]
    seconds, tokens = sum(s[7] for s in decode), sum(s[5] for s in decode)
    print(f"{path}: {len(steps)} steps; decode-only {len(decode)}: {seconds:.1f} s, {tokens:.0f} tokens, "
          f"{1e3 * seconds / tokens:.2f} ms/token (target {1e3 * sum(s[6] for s in decode) / tokens:.2f}, "
          f"drafting {1e3 * sum(s[8] for s in decode) / tokens:.2f}); with prompt tokens {len(prompt)}: "
          f"{sum(s[7] for s in prompt):.1f} s, {sum(s[5] for s in prompt):.0f} tokens")
    by_k = collections.defaultdict(list)
    for s in decode:
        by_k[int(s[2])].append(s)
    for k, group in sorted(by_k.items()):
        seqs, emitted = sum(s[1] for s in group), sum(s[5] for s in group)
        print(f"  k={k}: {len(group)} steps, {seqs / len(group):.1f} seqs, {st.mean(s[3] for s in group):.1f} rows, "
              f"{sum(s[4] for s in group) / seqs:.0f} context/seq, {emitted / seqs:.2f} tokens/seq; ms per step: "
              f"target {1e3 * st.mean(s[6] for s in group):.1f}, step {1e3 * st.mean(s[7] for s in group):.1f}, "
              f"drafting {1e3 * st.mean(s[8] for s in group):.1f}; {1e3 * sum(s[7] for s in group) / emitted:.2f} ms/token")
