"""Per-warp instruction mix of one kernel from Nsight Compute's SASS source page (`ncu --page source --print-source
sass`, as ncu_source.sh writes it): instructions executed per warp, by opcode, and the stall samples' spread.
    python3 docs/gpu/attention_1202_fiftyseventh/sass_mix.py calls/call4/ncu_source_b1.txt.gz"""
import collections
import gzip
import re
import sys


def main(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    executed, samples, static, warps = collections.Counter(), 0.0, 0, None
    for line in lines:
        if not re.match(r"^0x[0-9a-f]+\s", line):
            continue
        fields = line[80:].split()
        source = line[19:79].split()
        opcode = (source[1] if source[0].startswith("@") else source[0]).split(".")[0]
        samples += float(fields[0].replace(",", ""))
        warps = warps or float(fields[3].replace(",", ""))  # every instruction of the first block runs once a warp
        executed[opcode] += float(fields[3].replace(",", "")) / warps
        static += 1
    print(f"{static} SASS instructions, {sum(executed.values()):.0f} executed per warp, {samples:.0f} stall samples")
    for opcode, count in executed.most_common(12):
        print(f"  {opcode:8s} {count:6.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
