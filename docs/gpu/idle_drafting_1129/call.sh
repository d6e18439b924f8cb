#!/usr/bin/env bash
# The device calls of 2026-11-29, twenty-third session (one stage or two a call; environment.txt lists them): where an
# adaptive engine whose sequences have all retired from drafting lost its 3-5% against k = 0 offline (temperature
# 1.5, batch 32, bf16, graphs on; the gap of every GPU session since the ninth), and where a prompt step's time goes
# under MTP.
#   1. scripts/profile_decode.py: k = 0, fixed k = 3 and adaptive (k_max 3) alive together, batch 8 and 32: the
#      engine's counters per step (medians of 9 calls), then each engine's kernels and CUDA runtime calls per step
#      under torch.profiler (profile_b*.md)
#   2. scripts/profile_prompt_step.py, k = 0 and 3: a prompt step's host calls, ATen ops included (prompt_step.md)
#   3. offline, temperature 1.5, k = 0, fixed k = 3 and adaptive, batch 1, 8, 32, 64, 9 interleaved repeats
#      (offline_t15_r9.json)
#   4. probe: host_probe.patch (host time between marks in a step: each phase's median and mean, printed at exit; never landed)
#      applied, then the prompt step of k = 0 and of k = 3 (profile_prompt_step.py) and the decode steps of k = 0 and
#      adaptive at batch 32, temperature 1.5 (profile_decode.py), each engine in a process of its own (probe_*.txt)
#      probe_fill: the same with host_probe_fill.patch (marks inside the prompt step's target and MTP fill too), the
#      prompt steps alone (probe_fill_prompt_k*.txt)
#   5. first: offline as in 3 at batch 8 and 32, 5 repeats, every repeat's counters kept (offline_first_repeat.txt):
#      what adaptive's first repeat at a batch size does
#   6. balanced: offline after b41b3ee (the methods in a Williams order), temperature 1.5 (k = 0, fixed k = 3,
#      adaptive; 6 repeats, a whole cycle) and greedy (k = 0..3 fixed, adaptive; 10 repeats, a whole cycle), batch 1,
#      8, 32, 64; every repeat's counters kept (offline_balanced_*.txt, .json)
#   7. a graph launch's host time with one instantiated graph and with 300 more beside it in the same pool
#      (graph_launch.txt): the MTP engines record many more graphs than k = 0's
# Usage: call.sh [profile] [prompt] [offline] [probe|probe_fill] [first] [balanced] [launch]
#   (default: profile, prompt, offline, launch).
set -uo pipefail
[[ " $* " == *" probe "* ]] && git apply docs/gpu/idle_drafting_1129/host_probe.patch
[[ " $* " == *" probe_fill "* ]] && git apply docs/gpu/idle_drafting_1129/host_probe_fill.patch
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site  # the wheels gpu_check.sh installed from .whl
stages=${*:-profile prompt offline launch}
[[ " $stages " == *" profile "* ]] && for batch in 32 8; do
  timeout 240 python3 scripts/profile_decode.py --batch $batch --temperature 1.5 --ks 0 3 --adaptive-k-max 3 \
    --graphs on --tokens 128 --calls 9 --top 30 --out $OUT/profile_b$batch.md 2>&1 | grep -v "^USDT\|Loading" | head -150
done
[[ " $stages " == *" prompt "* ]] && timeout 200 python3 scripts/profile_prompt_step.py --devices cuda:0 --ks 0 3 \
  --top 40 --out $OUT/prompt_step.md 2>&1 | grep -v "^USDT\|Loading" | grep -A3 "^## "
[[ " $stages " == *" offline "* ]] && timeout 300 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 \
  --batch-sizes 1 8 32 64 --ks 0 3 --adaptive-k-max 3 --temperature 1.5 --repeats 9 --max-tokens 128 \
  --out $OUT/offline_t15_r9.json 2>&1 | grep "^|"
[[ " $stages " == *" first "* ]] && timeout 300 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 \
  --batch-sizes 8 32 --ks 0 3 --adaptive-k-max 3 --temperature 1.5 --repeats 5 --max-tokens 128 2>&1 \
  | grep -v "Loading" > $OUT/offline_first_repeat.txt
if [[ " $stages " == *" balanced "* ]]; then
  for run in t15:"--ks 0 3 --temperature 1.5 --repeats 6" greedy:"--ks 0 1 2 3 --repeats 10"; do
    timeout 280 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 1 8 32 64 \
      --adaptive-k-max 3 --max-tokens 128 ${run#*:} --out $OUT/offline_balanced_${run%%:*}.json 2>&1 \
      | grep -v "Loading" > $OUT/offline_balanced_${run%%:*}.txt
    grep "^|" $OUT/offline_balanced_${run%%:*}.txt
  done
fi
if [[ " $stages " == *" probe "* || " $stages " == *" probe_fill "* ]]; then
  name=$([[ " $stages " == *" probe_fill "* ]] && echo _fill)
  for k in 0 3; do
    timeout 120 python3 scripts/profile_prompt_step.py --devices cuda:0 --ks $k --top 1 2>&1 | grep "PROBE" \
      | tee $OUT/probe${name}_prompt_k$k.txt
  done
  [[ " $stages " == *" probe "* ]] && for method in k0:"--ks 0" k3:"--ks 3" adaptive:"--ks --adaptive-k-max 3"; do
    timeout 150 python3 scripts/profile_decode.py --batch 32 --temperature 1.5 ${method#*:} --graphs on --tokens 128 \
      --calls 5 --top 1 2>&1 | grep "PROBE" | tee "$OUT/probe_decode_b32_${method%%:*}.txt"
  done
fi
[[ " $stages " == *" launch "* ]] && timeout 120 python3 - <<'PY' 2>&1 | tee $OUT/graph_launch.txt
import statistics, time, torch
x = torch.zeros(4096, device="cuda")
def body():
    for _ in range(300):
        x.mul_(1.0001)
def capture(pool=None):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g, pool=pool):
        body()
    return g
def launch_us(g, before=None, n=200):
    times = []
    for i in range(n):
        if before:
            before(i)
        torch.cuda.synchronize()
        t = time.perf_counter()
        g.replay()
        times.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)
g0 = capture()
print(f"one graph of 300 kernels: launch {launch_us(g0):.1f} us host (median of 200)")
others = [capture(g0.pool()) for _ in range(300)]
print(f"with 300 more instantiated in its pool: launch {launch_us(g0):.1f} us host")
print(f"each launch after another graph's replay: {launch_us(g0, lambda i: others[i % 300].replay()):.1f} us host")
PY
