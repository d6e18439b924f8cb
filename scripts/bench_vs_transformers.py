"""Decode speed of mtpserve vs transformers' generate on one GPU, in one run (the P5 comparison).

The embedded model in bf16: a 128-token prompt, 256 new tokens (ignore_eos), greedy. transformers runs
batch 1 with its default dynamic cache and with a static cache (its fastest setting measured here);
mtpserve runs batch 1, 8, 32 and 128 with MTP k = 0..3, CUDA graphs on and off. Tokens/s count output
tokens over the wall time of the whole generate call (prefill included), best of --repeats after a
warm-up call. Writes JSON and a bar chart.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from mtpserve import LLM, SamplingParams
from mtpserve.engine_args import DEFAULT_MODEL

TEXT = ("The history of the city begins with a small harbour where fishermen traded salt and grain. Over the "
        "centuries the harbour grew into a port, the port into a market town, and the town into a city of bridges, "
        "canals and libraries. ")


def best_of(repeats: int, call) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def transformers_rates(prompt: list[int], new_tokens: int, repeats: int) -> list[dict]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(DEFAULT_MODEL, dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor([prompt], device="cuda")
    out = []
    for cache in ("dynamic", "static"):
        kwargs = {"cache_implementation": "static"} if cache == "static" else {}

        def call():
            with torch.inference_mode():
                model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, **kwargs)

        seconds = best_of(repeats, call)
        out.append({"engine": f"transformers ({cache} cache)", "batch": 1, "k": 0, "graphs": False,
                    "tokens_per_s": new_tokens / seconds})
        print(json.dumps(out[-1]), flush=True)
    del model
    torch.cuda.empty_cache()
    return out


def mtpserve_rates(prompt: list[int], new_tokens: int, repeats: int, batches: list[int], ks: list[int],
                   graph_modes: list[bool]) -> list[dict]:
    out = []
    params = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    for k in ks:
        for graphs in graph_modes:
            llm = LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=k, enable_graph=graphs,
                      enable_prefix_cache=False, max_model_len=1024, max_cache_blocks=4 * max(batches) + 8)
            for batch in batches:
                seconds = best_of(repeats, lambda: llm.generate([prompt] * batch, params))
                before, outputs = llm.stats(), llm.generate([prompt] * batch, params)
                spec = llm.stats().spec
                accepted = (spec.accepted_tokens - before.spec.accepted_tokens) / max(
                    1, spec.draft_tokens - before.spec.draft_tokens)
                assert all(len(o.outputs[0].token_ids) == new_tokens for o in outputs)
                out.append({"engine": "mtpserve", "batch": batch, "k": k, "graphs": graphs,
                            "tokens_per_s": batch * new_tokens / seconds, "acceptance_rate": accepted if k else None})
                print(json.dumps(out[-1]), flush=True)
            llm.shutdown()
            torch.cuda.empty_cache()
    return out


def table(results: list[dict]) -> str:
    hf = max(r["tokens_per_s"] for r in results if r["engine"].startswith("transformers"))
    lines = ["| engine | graphs | k | batch | tokens/s | vs transformers' fastest (batch 1) |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['engine']} | {'on' if r['graphs'] else 'off'} | {r['k']} | {r['batch']} | "
                     f"{r['tokens_per_s']:.0f} | {r['tokens_per_s'] / hf:.2f}x |")
    return "\n".join(lines)


def plot(results: list[dict], path: str, device: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if r["batch"] == 1]
    labels = [f"mtpserve k={r['k']} graphs {'on' if r['graphs'] else 'off'}" if r["engine"] == "mtpserve"
              else r["engine"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh(labels, [r["tokens_per_s"] for r in rows])
    ax.set_xlabel("output tokens/s, batch 1 (128-token prompt, 256 new tokens)")
    ax.set_title(f"embedded model, bf16, {device}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--ks", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--graphs", choices=("off", "on", "both"), default="both")
    parser.add_argument("--out", default=None, help="directory for bench_vs_transformers.json / .png")
    args = parser.parse_args()
    from mtpserve.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_dir(DEFAULT_MODEL)
    prompt = tokenizer.encode(TEXT * 16)[:args.prompt_tokens]
    assert len(prompt) == args.prompt_tokens
    graph_modes = {"off": [False], "on": [True], "both": [True, False]}[args.graphs]
    results = transformers_rates(prompt, args.new_tokens, args.repeats)
    results += mtpserve_rates(prompt, args.new_tokens, args.repeats, args.batches, args.ks, graph_modes)
    print(table(results))
    if args.out:
        device = torch.cuda.get_device_name(0)
        with open(f"{args.out}/bench_vs_transformers.json", "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "args": vars(args), "results": results}, f,
                      indent=1)
        plot(results, f"{args.out}/bench_vs_transformers.png", device)


if __name__ == "__main__":
    main()
