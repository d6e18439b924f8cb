"""Per-request acceptance and TPOT by output length, offline on the CPU, fixed k = 1 and k = 3 (acc_by_len.txt).
Run from the repository root."""
import statistics as st
from mtpserve import LLM, SamplingParams
from mtpserve.bench.datasets import load_tokenizer, sample_sharegpt_requests
reqs = sample_sharegpt_requests(load_tokenizer(model=None), 192, path=".data/sharegpt_heldout.json",
                                max_prompt_len=1024, max_total_len=768, split="held-out")
params = [SamplingParams(temperature=0, max_tokens=r.expected_output_len, ignore_eos=True) for r in reqs]
for k in (1, 3):
    llm = LLM(dtype="float32", num_speculative_tokens=k, speculative_policy="fixed", max_seqs_per_batch=64)
    outs = llm.generate([r.prompt for r in reqs], params, use_tqdm=False)
    rows = []
    for o in outs:
        m = o.metrics
        n = m.num_generation_tokens
        tp = (m.finished_time - m.first_token_time) / max(1, n - 1) * 1000
        steps = sum(m.steps_by_k)
        rows.append((n, m.acceptance_rate or 0, tp, steps))
    print(f"k={k}: mean tpot {st.mean(r[2] for r in rows):.2f}")
    for lo, hi in [(0, 16), (16, 32), (32, 64), (64, 128), (128, 300), (300, 2000)]:
        s = [r for r in rows if lo <= r[0] < hi]
        if s:
            print(f"  len {lo}-{hi} n={len(s)} acc {st.mean(r[1] for r in s):.3f} tpot {st.mean(r[2] for r in s):.2f} "
                  f"tokens/step {st.mean((r[0]-1)/max(1,r[3]) for r in s):.2f}")
    del llm
