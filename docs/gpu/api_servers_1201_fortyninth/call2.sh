#!/usr/bin/env bash
# The forty-ninth session's calls 2 to 4 (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data):
# the forty-eighth session's call 2 (issue 14's greedy cells with --api_server_count 4: k = 0, fixed k = 3 and
# adaptive, --isolated, 24 x c prompts, 5 repeats) run again on fc3a125, where each API server listens on a socket of
# its own: c = 64 (call 2), then c = 80 (calls 3 and 4).
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/api_servers_1201_fortyninth/call2.sh 64   (then 80)
exec bash "$(dirname "$0")/../api_servers_1201_fortyeighth/call2.sh" "$@"
