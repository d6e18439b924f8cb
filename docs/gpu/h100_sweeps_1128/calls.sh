#!/usr/bin/env bash
# The device calls behind this folder: the eighth session's isolated serving sweeps (docs/gpu/isolated_1127/calls.sh)
# on a lent H100, on the code of d7765d5, one stage per call, in this order (SHAREGPT: the held-out ShareGPT JSON):
#   SHAREGPT=... bash docs/gpu/isolated_1127/calls.sh greedy_long_a    # greedy, c = 1, 2, 4; k = 0, 2, 3, adaptive
#   SHAREGPT=... bash docs/gpu/isolated_1127/calls.sh t15_long_small   # temperature 1.5, c = 1..8; k = 0, adaptive
#   SHAREGPT=... bash docs/gpu/isolated_1127/calls.sh t15_long         # temperature 1.5, c = 16..80; k = 0, adaptive
# t15_long's 290 s limit cut adaptive's third repeat at c = 80: that cell's row is the slower of its two repeats.
exec bash docs/gpu/isolated_1127/calls.sh "$@"
