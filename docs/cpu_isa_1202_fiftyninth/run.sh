#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, this CPU (a 2-core Xeon with AMX and AVX-512 BF16): the README's main command
# (the embedded model in its default bf16, greedy, 64 tokens) at k = 0, 1 and 3, with and without --batch_invariant,
# under each instruction set that oneDNN's GEMM kernels can be capped to (ONEDNN_MAX_CPU_ISA; DEFAULT: uncapped).
# Prints each run's text as an md5 prefix and its last line.
cd "$(dirname "$0")/../.."
for bi in false true; do
  for isa in DEFAULT AVX512_CORE_AMX AVX512_CORE_BF16 AVX512_CORE AVX2; do
    for k in 0 1 3; do
      out=$(ONEDNN_MAX_CPU_ISA=$isa .venv/bin/mtpserve generate --prompt "What is the capital of France?" \
        --num_speculative_tokens $k --batch_invariant $bi 2>/dev/null)
      echo "batch_invariant=$bi $isa k=$k text=$(echo "$out" | sed '1d;$d' | md5sum | cut -c1-8) $(echo "$out" | tail -1)"
    done
  done
done
