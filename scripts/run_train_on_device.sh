#!/usr/bin/env bash
# What runs on the lent GPU machine (repo root, .data/ carried; made by scripts/prepare_tiny_data.py).
#   bash scripts/run_train_on_device.sh smoke                 # eager + torch.compile speed/memory check
#   bash scripts/run_train_on_device.sh full NAME [ARGS...]   # one training; ARGS go to train_tiny_model.py
# `full` trains into /tmp/NAME and leaves in $OUT: NAME.log and NAME.tar.part-aa, -ab.. (<= 15 MiB pieces, so
# they fit the transfer limits). Here: cat NAME.tar.part-* | tar xf - ; cp .data/tokenizer/* NAME/
# (with --max-shard-mb the model is sharded instead; merge with train_tiny_model.py --consolidate NAME).
set -uo pipefail
MODE=${1:-full}; shift || true
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
T=scripts/train_tiny_model.py
case "$MODE" in
  smoke)
    python3 $T --data .data --out "$OUT/model" --max-steps 40 --log-every 10 --eval-every 0 \
      --eval-windows 16 --max-shard-mb 12 "$@" 2>&1 | tee "$OUT/smoke_eager.log"
    python3 $T --data .data --out /tmp/compiled --compile --max-steps 100 --log-every 10 --eval-every 0 \
      --eval-windows 16 --time-budget 150 "$@" 2>&1 | tee "$OUT/smoke_compile.log"
    ;;
  full)
    NAME=${1:?name}; shift
    python3 $T --data .data --out "/tmp/$NAME" --compile --tokenizer-dir '' --log-every 100 "$@" 2>&1 \
      | tee "$OUT/$NAME.log"
    tar cf - -C /tmp "$NAME" | split -b 15m - "$OUT/$NAME.tar.part-"
    ;;
  *) echo "unknown mode $MODE"; exit 2 ;;
esac
