# The two serving sweeps of 2026-11-29 (nineteenth session), on the code of 7962ce0, one lent H200 each call
# (the same machine, warm between them). SHAREGPT: the held-out ShareGPT JSON cut to each record's first two turns.
# long_b_c8_80.tgz:  SHAREGPT=... bash docs/gpu/isolated_1127/calls.sh greedy_long_b
# c64_80_r5.tgz:     SHAREGPT=... SWEEP_ARGS="--ks 0,3 --concurrencies 64,80 --repeats 5" \
#                      bash docs/gpu/isolated_1127/calls.sh greedy_long_b
# The fix these runs led to (ed537e5) was checked with ../prefill_capture_1129/check.sh.
