"""Reads run.sh's outputs in DIR (engine.txt, probe.txt, gpu_clocks.csv) and prints, for each PHASES line (2,000
decode steps), the engine's host time on the critical path and its device wait (sample+wait), beside the probe's
median timings over the same seconds; then how far each drifted and how closely they moved together.
    python3 drift.py DIR
"""
import re
import statistics
import sys
from pathlib import Path

BEHIND_LAUNCH = {3, 4, 11}  # plan_ahead, sample+wait, cost record: the host runs these while the device computes


def engine_lines(path):
    rows = []
    for line in open(path):
        m = re.match(r'(\d+\.\d+) PHASES \w+ .* n=\d+ (.*)', line)
        if m:
            phases = [float(x.split(':')[1]) for x in m.group(2).split()]
            critical = sum(v for i, v in enumerate(phases) if i not in BEHIND_LAUNCH)
            rows.append((float(m.group(1)), critical, phases[4]))
    return rows


def probe_lines(path):
    return [tuple(float(x) for x in line.split()) for line in open(path) if re.match(r'\d+\.\d+ ', line)]


def pearson(a, b):
    ma, mb = statistics.mean(a), statistics.mean(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return cov / (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5


def spread(name, values):
    q = statistics.quantiles(values, n=10)
    print(f'{name}: median {statistics.median(values):.2f}, 10th-90th percentile {q[0]:.2f}-{q[-1]:.2f}, '
          f'min {min(values):.2f}, max {max(values):.2f}')


def main(out):
    engine, probe = engine_lines(out / 'engine.txt'), probe_lines(out / 'probe.txt')
    rows = []
    for (t0, _, _), (t1, critical, wait) in zip(engine, engine[1:]):
        window = [p for p in probe if t0 < p[0] <= t1]
        if window:
            rows.append((t1, critical, wait, statistics.median(p[1] for p in window),
                         statistics.median(p[2] for p in window)))
    print(f'{len(rows)} windows of 2,000 decode steps ({rows[-1][0] - rows[0][0]:.0f} s)')
    print('| s | critical host us | sample+wait us | probe python ms | probe copy ms |\n|---:|---:|---:|---:|---:|')
    for t, critical, wait, py, cp in rows[::max(1, len(rows) // 20)]:
        print(f'| {t - rows[0][0]:.0f} | {critical:.1f} | {wait:.1f} | {py:.3f} | {cp:.3f} |')
    names = ['critical host us', 'sample+wait us', 'probe python ms', 'probe copy ms']
    for i, name in enumerate(names, 1):
        spread(name, [r[i] for r in rows])
    for i, j in ((1, 3), (1, 4), (2, 3), (2, 4), (1, 2)):
        print(f'correlation {names[i - 1]} ~ {names[j - 1]}: {pearson([r[i] for r in rows], [r[j] for r in rows]):+.2f}')
    clocks = out / 'gpu_clocks.csv'
    if clocks.exists():
        sm = [float(m.group(1)) for m in re.finditer(r', (\d+) MHz, \d+ MHz', clocks.read_text())]
        if sm:
            print(f'GPU SM clock: {min(sm):.0f}-{max(sm):.0f} MHz over {len(sm)} readings')


if __name__ == '__main__':
    main(Path(sys.argv[1]))
