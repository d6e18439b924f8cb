"""lm-evaluation-harness against `mtpserve serve` and against lm_eval's own HF (transformers) backend,
on the embedded model in float32, with two tasks defined on local data files (no hub access):

- mtpserve_mc: multiple choice, scored by log-likelihood (/v1/completions with echo + logprobs);
- mtpserve_gen: generate_until, greedy, exact match.

The server runs once per MTP k (default 0 and 2); every request's log-likelihood and every
generation is compared with the HF backend's. Prints a table; --out writes the numbers as JSON.

    .venv/bin/python scripts/lm_eval_compare.py --ks 0 2 --out /tmp/lm_eval.json
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "models" / "tiny-dsv3-mtp"
SERVED = "tiny"
TOLERANCE = 1e-3

MC = [
    ("Can you help me write an email to my", [" boss", " banana", " ocean"], 0),
    ("I want to learn how to cook", [" pasta", " purple", " quickly the"], 0),
    ("What is the best way to learn a new", [" language", " table", " seven"], 0),
    ("Please translate the following sentence into", [" French", " green", " yesterday"], 0),
    ("Write a short story about a", [" dragon", " because", " the of"], 0),
    ("How do I install Python on my", [" computer", " sandwich", " river"], 0),
    ("Explain the difference between a list and a", [" tuple", " mountain", " happy"], 0),
    ("Give me some tips to improve my", [" sleep", " which", " seventeen"], 0),
    ("Summarize the main points of the", [" article", " jumped", " blue"], 0),
    ("What are the health benefits of drinking", [" water", " chairs", " running"], 0),
    ("Can you recommend a good book about", [" history", " quickly", " spoon"], 0),
    ("How can I make my website load", [" faster", " elephant", " under"], 0),
]
GEN = [
    "Write a haiku about the sea.\n",
    "What is the capital of France?\n",
    "List three primary colors:",
    "Tell me a joke about programmers.",
    "How do I reverse a string in Python?",
    "Describe a sunset in one sentence:",
    "Give me a name for a pet cat:",
    "What is 2 + 2?",
]


def write_tasks(folder: Path) -> None:
    with open(folder / "mc.jsonl", "w") as f:
        for question, choices, answer in MC:
            f.write(json.dumps({"question": question, "choices": choices, "answer": answer}) + "\n")
    with open(folder / "gen.jsonl", "w") as f:
        for prompt in GEN:
            f.write(json.dumps({"prompt": prompt, "target": "Paris"}) + "\n")
    (folder / "mc.yaml").write_text(f"""task: mtpserve_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder / 'mc.jsonl'}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
""")
    (folder / "gen.yaml").write_text(f"""task: mtpserve_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder / 'gen.jsonl'}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 24
  do_sample: false
metric_list:
  - metric: exact_match
""")


def evaluate(model: str, model_args: str, tasks_dir: Path) -> dict:
    """Scores and per-request responses of both tasks: {task: (score, [resps per request])}."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    result = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=["mtpserve_mc", "mtpserve_gen"],
                                     task_manager=TaskManager(include_path=str(tasks_dir)), log_samples=True,
                                     batch_size=1, random_seed=0, numpy_random_seed=0, torch_random_seed=0)
    out = {}
    for task, metric in (("mtpserve_mc", "acc,none"), ("mtpserve_gen", "exact_match,none")):
        samples = sorted(result["samples"][task], key=lambda s: s["doc_id"])
        out[task] = (result["results"][task][metric], [s["resps"] for s in samples])
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(k: int, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "mtpserve.cli", "serve", "--port", str(port), "--dtype", "float32",
                             "--num_speculative_tokens", str(k), "--served_model_name", SERVED],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("mtpserve serve exited before it was healthy")
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("mtpserve serve did not become healthy in 120 s")


def loglikelihoods(resps: list) -> list[float]:
    return [float(choice[0][0]) for request in resps for choice in request]


def compare(reference: dict, ours: dict) -> dict:
    ref_ll, our_ll = loglikelihoods(reference["mtpserve_mc"][1]), loglikelihoods(ours["mtpserve_mc"][1])
    ref_gen, our_gen = reference["mtpserve_gen"][1], ours["mtpserve_gen"][1]
    return {"mc_acc": ours["mtpserve_mc"][0], "gen_exact_match": ours["mtpserve_gen"][0],
            "max_abs_loglikelihood_diff": max(abs(a - b) for a, b in zip(ref_ll, our_ll)),
            "loglikelihood_requests": len(our_ll), "generations_equal": sum(a == b for a, b in zip(ref_gen, our_gen)),
            "generations": len(our_gen)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tasks_dir = Path(tmp)
        write_tasks(tasks_dir)
        reference = evaluate("hf", f"pretrained={MODEL_DIR},dtype=float32,device=cpu", tasks_dir)
        rows = {"hf": {"mc_acc": reference["mtpserve_mc"][0], "gen_exact_match": reference["mtpserve_gen"][0]}}
        ok = True
        for k in args.ks:
            port = free_port()
            proc = serve(k, port)
            try:
                ours = evaluate("local-completions",
                                f"model={SERVED},base_url=http://127.0.0.1:{port}/v1/completions,"
                                f"tokenizer_backend=huggingface,tokenizer={MODEL_DIR},tokenized_requests=True,"
                                f"num_concurrent=1,max_retries=1", tasks_dir)
            finally:
                proc.terminate()
                proc.wait(30)
            rows[f"mtpserve k={k}"] = row = compare(reference, ours)
            ok &= (row["max_abs_loglikelihood_diff"] <= TOLERANCE and row["mc_acc"] == rows["hf"]["mc_acc"]
                   and row["generations_equal"] == row["generations"])
    for name, row in rows.items():
        print(f"{name:14s} " + "  ".join(f"{key}={value:.6g}" if isinstance(value, float) else f"{key}={value}"
                                          for key, value in row.items()))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    print("equal within", TOLERANCE, "on every request" if ok else "NOT on every request")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
