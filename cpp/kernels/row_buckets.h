#pragma once
// Row counts for forwards that run eagerly (prefill chunks, mixed steps, catch-ups), where a device's GEMM
// library chooses its kernel per problem shape and caches the choice: cuBLAS on an H200 spent 0.1-1.7 ms of host
// time on the first bf16 GEMM of each new row count and 17 us on a repeat (docs/benchmarks.md), and a mixed step
// of serving meets a new row count in every GEMM of every layer. Padding such a forward up to one of a few row
// counts lets those choices be reused.
#include <cstdint>

namespace mtpserve::kernels {

// The row count a forward run eagerly is padded to on a device (KernelOps::eager_rows; this file's rule on a GPU).
using EagerRowsFn = int64_t (*)(int64_t rows);

// `rows` rounded up to one of 16 counts per octave from 256 on, and to a multiple of 8 below: at most 1/16 more
// rows from 128 on, and 32 + 16 * log2(rows / 256) distinct counts up to `rows`. A rounded count rounds to itself.
int64_t round_up_rows(int64_t rows);

}  // namespace mtpserve::kernels
