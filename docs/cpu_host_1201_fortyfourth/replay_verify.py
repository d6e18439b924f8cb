"""Replays the verify samples that trace_and_skip.diff's TRACE lines recorded (MTPX_TRACE=1) through the cost model
of the `_C` that is built, and prints after each step of one run what the model then prices a k = 0 and a k = 1 step
of the batch of 64 at, against what the step measured. The samples before START prime the model, as the engine had
them. From the repository root, with logs.tgz unpacked in /tmp:
  .venv/bin/python docs/cpu_host_1201_fortyfourth/replay_verify.py /tmp/e5.log "r2 k0:" "r2 ad:"
(pair.py prints a round's line after its run, so round 2's adaptive samples lie between those two lines.)"""
import re, sys
from mtpserve import _C

log, start, end = sys.argv[1], sys.argv[2], sys.argv[3]
lines, on = [], False
for line in open(log):
    if line.startswith(start): on = True
    elif line.startswith(end): on = False
    elif on and line.startswith("TRACE verify"):
        k, rows, ctx, ms = re.match(r"TRACE verify k(\d) rows (\d+) ctx (\d+) ms ([\d.]+)", line).groups()
        lines.append((int(k), int(rows), int(ctx), float(ms)))
# Prime the model as the run found it: the trace of the rounds before (same log, from its top).
p = _C.SpeculationPolicy(_C.SpeculationPolicyKind.adaptive, 3, fill_every=64)
before = []
for line in open(log):
    if line.startswith(start): break
    m = re.match(r"TRACE verify k(\d) rows (\d+) ctx (\d+) ms ([\d.]+)", line)
    if m: before.append(tuple(map(float, m.groups())))
for k, rows, ctx, ms in before:
    p.record_verify(64, int(k), int(rows), int(ctx), ms / 1e3)
for i, (k, rows, ctx, ms) in enumerate(lines):
    p.record_verify(64, k, rows, ctx, ms / 1e3)
    print(f"{i:3d} k{k} measured {ms:6.2f} ms | priced after: k0 {p.verify_seconds(64, 0, 64, ctx + 64) * 1e3:6.2f} "
          f"k1 {p.verify_seconds(64, 1, 128, ctx + 128) * 1e3:6.2f}")
