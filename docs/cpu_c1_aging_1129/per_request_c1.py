"""Per request at c = 1: fixed k = 3 against adaptive, the sweep's 16 held-out ShareGPT prompts, one at a time."""
import sys, statistics
from mtpserve import LLM, SamplingParams
from mtpserve.bench import datasets

tok = datasets.load_tokenizer()
reqs = datasets.sample_sharegpt_requests(tok, 16, split="held-out", max_total_len=768)
methods = sys.argv[1].split(",") if len(sys.argv) > 1 else ["fixed", "adaptive"]
llms = {m: LLM(devices="cpu", dtype="float32", num_speculative_tokens=3, speculative_policy=m) for m in methods}
for m, llm in llms.items():  # warm-up
    llm.generate(["Hello there"], SamplingParams(max_tokens=8, ignore_eos=True))
rows = {m: [] for m in methods}
for i, r in enumerate(reqs):
    for m, llm in llms.items():
        out = llm.generate([r.prompt], SamplingParams(temperature=0.0, max_tokens=r.expected_output_len, ignore_eos=True))[0]
        mt = out.metrics
        n = len(out.outputs[0].token_ids)
        tpot = (mt.finished_time - mt.first_token_time) / max(n - 1, 1) * 1e3
        rows[m].append((tpot, n, mt.acceptance_rate, list(mt.steps_by_k), mt.retired_from_drafting, list(mt.accepted_per_position), mt.num_drafts))
for i in range(len(reqs)):
    print(i, " | ".join(f"{m}: tpot {rows[m][i][0]:.2f} n {rows[m][i][1]} acc {rows[m][i][2] if rows[m][i][2] is None else round(rows[m][i][2],2)} k {rows[m][i][3]} ret {rows[m][i][4]} pos {rows[m][i][5]}/{rows[m][i][6]}" for m in methods))
for m in methods:
    print(m, "mean TPOT", statistics.mean(x[0] for x in rows[m]), "median", statistics.median(x[0] for x in rows[m]))
