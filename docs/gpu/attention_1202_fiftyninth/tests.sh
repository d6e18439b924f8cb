#!/usr/bin/env bash
# Run by scripts/gpu_ab.sh (through ab.sh) against each version in place: its outputs on fixed inputs (the fifteenth session's
# docs/gpu/q_registers_1128/dump_attn.py), named after the variant folder whose files are all in place (A: none),
# then, for the versions in PYTEST_VERSIONS, the attention tests.
cd "$(dirname "$0")/../../.."
name=A
for v in .ab/*/; do
  same=1
  for f in $(cd "$v" && find . -type f); do cmp -s "$v/$f" "$f" || same=0; done
  [ $same = 1 ] && name=$(basename "$v")
done
mkdir -p /tmp/dumps && timeout 60 python3 docs/gpu/q_registers_1128/dump_attn.py /tmp/dumps/$name.pt && echo "dumped $name"
[[ " ${PYTEST_VERSIONS:-} " == *" $name "* ]] || exit 0
timeout 200 python3 -m pytest -q -p no:cacheprovider -x -rfE tests/test_cuda_attention.py
