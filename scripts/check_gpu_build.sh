#!/usr/bin/env bash
# Run on the lent GPU machine (device tool): builds mtpserve._C against that machine's own torch
# (2.11 + CUDA 13; no build isolation, nothing downloaded), imports it, and runs the parity and
# engine tests there. The engine's kernels are the CPU ones so far; this proves the build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/mtpserve-gpu-check}
mkdir -p "$out"
python3 - <<'PY' | tee "$out/environment.txt"
import torch, platform
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print("python", platform.python_version())
PY
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -e . > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
echo "build seconds: $(( $(date +%s) - start ))" | tee -a "$out/environment.txt"
python3 -c "import mtpserve._C as c; print('import ok:', c.__file__)" | tee -a "$out/environment.txt"
python3 -m pytest -q -p no:cacheprovider tests/test_parity.py tests/test_engine.py tests/test_mtp.py \
  tests/test_tensor_parallel.py tests/test_fused_mtp_attention.py 2>&1 | tee "$out/pytest.log" | tail -5
