# The Hopper attention kernel as a programmatic dependent launch (2026-11-29, nineteenth session). Versions:
#   pdlr (the tree): dependent launch; the kernel releases its own dependents at its start; a tile of positions from
#        earlier steps goes out before griddepcontrol.wait, the rest and Q after; the combine kernel releases at its
#        start; an empty split waits before it writes;
#   pdl: the same without the attention kernel's release (its dependents start as its blocks exit);
#   main: 8241445.
# Prepared from the repository root: the tree holds pdlr (main plus pdlr.patch), .ab/pdl and .ab/main the others'
# $FILES. Run with .whl, .tl, .ab. As run, .ab/pdlr was missing, so the "pdlr 2" bench rebuilt the tree with main's
# files in it: that run is main's third (bench_main_3.txt). between.py ran as .tl/between.py.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/mla_attention.cu"
BATCHES=1,16,64
source docs/gpu/early_copy_1128/ab_lib.sh
paths() { python3 scripts/bench_mla_attention.py --batches 1,16 --ks 0,3 --reps 5 --breakdown --out /tmp/p > /dev/null 2>&1
  python3 -c "import json; [print(r['batch'], r['k'], [(x[0][:26], round(x[1], 1)) for x in r['kernels']]) for r in json.load(open('/tmp/p/mla_attention.json'))['results']]" 2>&1 | tee -a $out/exp.txt; }
between() { python3 docs/gpu/pdl_attention_1129/between.py 2>&1 | tee -a $out/exp.txt; }
ts "built pdlr (tree)"
dump pdlr; attention_tests; paths; between; bench pdlr 1
use pdl; dump pdl; between; bench pdl 1
use main; dump main; between; bench main 1
compare pdlr main; compare pdl main
use pdlr; bench pdlr 2
use pdl; bench pdl 2
use main; bench main 2
ts done
