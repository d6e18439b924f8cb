#!/usr/bin/env bash
# The fiftieth session's H200 serving sweep (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16, CUDA graphs; carry
# .whl and .data): issue 14's greedy sweep with every method, k = 0, fixed k = 1, 2, 3 and adaptive (k_max 3), at
# c = 1..80 on one engine and frontend (fc3a125's, four API-server processes at every c), --isolated (a fresh server
# per method and repeat), 3 repeats. One call per stage, on one warm machine; a stage runs all methods of its cells:
#   small  c = 1, 2, 4      12 x c prompts, at least 72 (the fortieth session's cells)
#   mid    c = 8, 16, 32    the same
#   large  c = 64, 80       24 x c prompts (the forty-sixth session's, for the frontend's hold at 12 x c)
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/sweep_1201_fiftieth/call.sh small   (then mid, large)
# Here, after the calls (their files in calls/call1..3): the three stages' cells as one table and plots in merged/:
#   bash docs/gpu/sweep_1201_fiftieth/call.sh merge
# (SWEEP_DIR=another folder with calls/call1..3, e.g. the fifty-sixth session's rerun, merges that one instead.)
set -uo pipefail
if [ "${1:-}" = merge ]; then
  here=$(cd "${SWEEP_DIR:-$(dirname "$0")}" && pwd)
  mkdir -p "$here/merged"
  python3 - "$here" <<'PY'
import json, sys, tarfile
from pathlib import Path
here = Path(sys.argv[1])
parts = []
for i, stage in enumerate(("small", "mid", "large"), 1):
    with tarfile.open(here / f"calls/call{i}/greedy_{stage}.tgz") as archive:
        parts.append(json.load(archive.extractfile(f"greedy_{stage}/sweep.json")))
merged = dict(parts[0], command=" ; ".join(p["command"] for p in parts),
              concurrencies=[c for p in parts for c in p["concurrencies"]], rows=[r for p in parts for r in p["rows"]])
(here / "merged/sweep.json").write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
PY
  cd "$here/../../.." && exec .venv/bin/python scripts/bench_mtp_sweep.py --out-dir "$here/merged" --replot
fi
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
stage=${1:?stage: small, mid or large}
cd "$(dirname "$0")/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
SECONDS=0
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
case $stage in
  small) cells="--concurrencies 1,2,4 --prompts-factor 12" ;;
  mid) cells="--concurrencies 8,16,32 --prompts-factor 12" ;;
  large) cells="--concurrencies 64,80 --prompts-factor 24" ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
name=greedy_$stage
timeout $((575 - SECONDS)) python3 scripts/bench_mtp_sweep.py --isolated --repeats 3 --min-prompts 72 $cells \
  --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
  --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" --ks 0,1,2,3 --adaptive-k-max 3 \
  --temperature 0 -- --devices cuda:0 --dtype bfloat16 --api_server_count 4 2>&1 \
  | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"  # epoch seconds a line
rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
tar xzf "$OUT/$name.tgz" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP adaptive'
echo "total: $SECONDS s"
