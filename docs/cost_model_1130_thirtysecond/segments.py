"""The runs of a traced bench_offline.py log (stdout and stderr in one file, gzipped): each run's JSON line follows
the cost samples its warm-up and timed chat recorded.  python3 segments.py <log.gz> <batch>: the adaptive runs at
that batch, with their verify samples' count and median by step k."""
import collections
import gzip
import json
import statistics as st
import sys


def segments(path):
    """[(run's JSON, samples)]; a sample is ('V', seqs, k, rows, context, s) or ('D', seqs, fill, recursions,
    recursion rows, s)."""
    out, samples = [], []
    for line in gzip.open(path, 'rt'):
        if line.startswith(('V ', 'D ')):
            p = line.split()
            samples.append((p[0], *map(int, p[1:5]), float(p[5])))
        elif line.startswith('{"k"'):
            out.append((json.loads(line), samples))
            samples = []
    return out


if __name__ == '__main__':
    batch = int(sys.argv[2])
    for run, samples in segments(sys.argv[1]):
        if run['policy'] != 'adaptive' or run['batch'] != batch:
            continue
        verify = collections.defaultdict(list)
        for s in samples:
            if s[0] == 'V' and s[1] == batch:
                verify[s[2]].append(s[5] * 1e3)
        print(round(run['tokens_per_s']), run['steps_by_k'],
              {k: (len(v), round(st.median(v), 3)) for k, v in sorted(verify.items())})
