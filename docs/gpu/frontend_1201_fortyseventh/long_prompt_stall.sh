#!/usr/bin/env bash
# On this CPU (float32, the embedded model, k = 0): long_prompt_stall.py against a server that tokenizes as main did
# before the forty-seventh session (base: every prompt on a tokenizer thread, the GIL held while it encodes) and as
# the change does (product: short text on the event loop, long text on a thread with the GIL released).
#   bash docs/gpu/frontend_1201_fortyseventh/long_prompt_stall.sh > docs/gpu/frontend_1201_fortyseventh/long_prompt_stall.txt
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
py=${PYTHON:-.venv/bin/python}
for variant in base product base product; do
  keep=$([ $variant = product ] && echo 1 || echo 0)
  FRONTEND_TRACE=/tmp/stall_$variant.json FRONTEND_KEEP_ENCODE=$keep PYTHONPATH=$here/site $py -m mtpserve.cli serve \
    --port 8124 --dtype float32 --num_speculative_tokens 0 > /tmp/stall_$variant.log 2>&1 &
  pid=$!
  $py -c "import time, urllib.request as u
for _ in range(240):
    try: u.urlopen('http://127.0.0.1:8124/health', timeout=2); break
    except OSError: time.sleep(0.5)"
  echo "== $variant"
  $py "$here/long_prompt_stall.py" http://127.0.0.1:8124
  kill -INT $pid; wait $pid
done
