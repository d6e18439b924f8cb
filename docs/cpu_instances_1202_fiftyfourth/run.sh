#!/usr/bin/env bash
# The fifty-fourth session's check on this CPU (2-core AMD EPYC, torch 2.13.0+cpu, the embedded model, its default
# dtype), from the repository root with the extension built:
#   aslr.txt         10 pairs, one after the other: an engine process as launched, then one with address-space
#                    randomisation off (setarch -R) and PYTHONHASHSEED=0, so every such process has the same layout;
#                    each times one greedy batch of 8 x 200 tokens at k = 0 (one_round.py)
#   four_rounds.txt  12 engine processes one after the other, each timing the same batch of 8 x 120 tokens four times
#                    in a row (four_rounds.py): epoch seconds and mean ms a step per round (run before the script
#                    printed the process's transparent huge pages)
#   thp.txt          8 pairs of such processes: as launched, then with torch's huge-page allocation on
#                    (THP_MEM_ALLOC_ENABLE=1; the host's transparent huge pages are madvise-only), huge_kB as read
#                    from the process's smaps at its end
here=$(cd "$(dirname "$0")" && pwd)
for i in $(seq 1 10); do
  echo "on $(.venv/bin/python "$here/one_round.py" 0 2>&1 | grep RESULT)"
  echo "off $(PYTHONHASHSEED=0 setarch -R .venv/bin/python "$here/one_round.py" 0 2>&1 | grep RESULT)"
done > "$here/aslr.txt"
for i in $(seq 1 12); do .venv/bin/python "$here/four_rounds.py" 0 2>&1 | grep RESULT; done > "$here/four_rounds.txt"
for i in $(seq 1 8); do
  echo "default $(.venv/bin/python "$here/four_rounds.py" 0 2>&1 | grep RESULT)"
  echo "thp $(THP_MEM_ALLOC_ENABLE=1 .venv/bin/python "$here/four_rounds.py" 0 2>&1 | grep RESULT)"
done > "$here/thp.txt"
