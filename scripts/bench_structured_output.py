"""MTP under a grammar: acceptance and time per output token of mtpserve.LLM with a JSON schema and
without, at k = 0 and fixed k, side by side.

The same chat prompts run twice per cell: once free (ignore_eos, max_tokens = --free-tokens, by default
about the schema's output length) and once under a bounded JSON schema (max_tokens = --schema-tokens; the
output ends where the grammar does).
ms/token is the wall time of the generate call (prefill included) over its output tokens, after one
warm-up call; with --repeats N each cell is the median of N calls, the variants interleaved. The grammar's
host cost (masks of every sampled row, each verify row included) is inside sample ms/step, which
is the engine's host time from the target's launch until a step's tokens are known; the revision of
the drafts is inside draft ms/step. Acceptance is of the drafts verified (after the revision, which
shortens a request's drafts where the grammar forbids one and forces nothing); tokens/step (output tokens
over engine steps, prefill included) shows what a step yields.
"""
from __future__ import annotations

import argparse
import json
import platform

import torch

from bench_offline import timed_chat
from mtpserve import LLM, SamplingParams
from mtpserve.structured_output import StructuredOutput

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "city", "member", "tags"],
          "properties": {"name": {"type": "string", "maxLength": 16},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"type": "string", "maxLength": 16},
                         "member": {"type": "boolean"},
                         "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 8}}}}
PROMPTS = ["Describe a person as JSON.", "Who is Ada Lovelace?", "Give me a customer record.",
           "A sailor from Lisbon, as JSON.", "Tell me about a teacher.", "Describe your best friend.",
           "A user profile, please.", "Who lives next door?"]


def run(llm: LLM, batch: int, params: SamplingParams) -> dict:
    outputs, elapsed, before, after, generated = timed_chat(llm, PROMPTS, batch, params)
    draft_tokens = after.spec.draft_tokens - before.spec.draft_tokens
    accepted = after.spec.accepted_tokens - before.spec.accepted_tokens
    steps = after.steps - before.steps
    valid = sum(1 for o in outputs if _parses(o.outputs[0].text))
    return {"ms_per_token": elapsed / generated * 1e3, "tokens": generated, "tokens_per_step": generated / steps,
            "valid_json": valid,
            "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
            "sample_ms_per_step": (after.sample_seconds - before.sample_seconds) / steps * 1e3,
            "draft_ms_per_step": (after.draft_seconds - before.draft_seconds) / steps * 1e3}


def _parses(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--ks", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--free-tokens", type=int, default=32)
    parser.add_argument("--schema-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()

    variants = {"free": SamplingParams(temperature=args.temperature, max_tokens=args.free_tokens, ignore_eos=True),
                "schema": SamplingParams(temperature=args.temperature, max_tokens=args.schema_tokens,
                                         structured_output=StructuredOutput.json_schema(SCHEMA))}
    rows = []
    for k in args.ks:
        llm = LLM(args.model, dtype=args.dtype, num_speculative_tokens=k, speculative_policy="fixed")
        try:
            for batch in args.batch_sizes:
                for params in variants.values():
                    llm.chat([[{"role": "user", "content": PROMPTS[0]}]], params)  # warm-up
                runs = {name: [] for name in variants}
                for _ in range(args.repeats):
                    for name, params in variants.items():
                        runs[name].append(run(llm, batch, params))
                for name, results in runs.items():
                    median = sorted(results, key=lambda r: r["ms_per_token"])[len(results) // 2]
                    rows.append({"k": k, "batch": batch, "output": name, **median,
                                 "ms_per_token_all": [r["ms_per_token"] for r in results]})
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            llm.shutdown()
    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.dtype}, "
          f"temperature {args.temperature}, median of {args.repeats}")
    print("| k | batch | output | tokens | ms/token | acceptance | tokens/step | sample ms/step | draft ms/step | "
          "valid JSON |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rate = "—" if r["acceptance_rate"] is None else f"{r['acceptance_rate']:.2f}"
        print(f"| {r['k']} | {r['batch']} | {r['output']} | {r['tokens']} | {r['ms_per_token']:.2f} | {rate} | "
              f"{r['tokens_per_step']:.2f} | {r['sample_ms_per_step']:.2f} | {r['draft_ms_per_step']:.2f} | "
              f"{r['valid_json']}/{r['batch']} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
