"""Each version's kernel times per (context, B, k) from the runs.tgz of scripts/gpu_ab.sh, where the benchmark ran
with --breakdown: eager device µs of the attention kernel and of the combine kernel, in every round.
    python3 docs/gpu/attention_1202_fiftyninth/kernels.py runs.tgz"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts"))
from ab_table import read_runs  # noqa: E402


def main(path):
    runs = read_runs(path)
    print("| context | B | k | version | attention kernel µs | combine kernel µs |")
    print("|---|---|---|---|---|---|")
    for cell in runs["A"][0]:
        for v, rounds in runs.items():
            kernels = [{name.split("<")[0]: us for name, us, _ in r[cell].get("kernels", [])} for r in rounds]
            attention = " / ".join(f"{k.get('mla_attention_wgmma_kernel', 0):.1f}" for k in kernels)
            combine = " / ".join(f"{k.get('mla_combine_kernel', 0):.1f}" for k in kernels)
            print(f"| {cell[0]} | {cell[1]} | {cell[2]} | {v} | {attention} | {combine} |")


if __name__ == "__main__":
    main(sys.argv[1])
