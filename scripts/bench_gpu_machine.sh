#!/usr/bin/env bash
# Run on the lent GPU machine (device tool, carry .whl): builds mtpserve against that machine's torch,
# installs the server's wheels missing from its image, and runs the MTP serving sweep there.
# The engine's kernels are the CPU ones so far (devices=cpu on the GPU host's 16 cores); the GPU
# itself is idle. Results come back as $OUT/sweep.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
lscpu | grep -E "Model name|^CPU\(s\)" > "$OUT/machine.txt"; nvidia-smi -L >> "$OUT/machine.txt"
timeout "${SWEEP_SECONDS:-420}" python3 scripts/bench_mtp_sweep.py --dataset-name random --random-input-len 128 \
  --random-output-len 128 --ignore-eos --disable-tqdm --out-dir /tmp/sweep_gpu -- --dtype float32 \
  2>&1 | tee "$OUT/sweep.log" | grep -E "c=|==" 
tar czf "$OUT/sweep.tgz" -C /tmp sweep_gpu
