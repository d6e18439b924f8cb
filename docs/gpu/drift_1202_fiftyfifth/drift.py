"""Reads run.sh's outputs in DIR (engine.txt, probe.txt, gpu_clocks.csv, steal.txt where run.sh read it) and prints, for each PHASES line (2,000
decode steps), the engine's host time on the critical path and its device wait (sample+wait), beside the probe's
median timings over the same seconds; then how far each drifted and how closely they moved together.
    python3 drift.py DIR
"""
import datetime
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
            rows.append((float(m.group(1)), critical, phases[4], phases[2]))
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
    for (t0, *_), (t1, critical, wait, _) in zip(engine, engine[1:]):
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
        r = pearson([row[i] for row in rows], [row[j] for row in rows])
        print(f'correlation {names[i - 1]} ~ {names[j - 1]}: {r:+.2f}')
    critical = [row[1] for row in rows]
    means = [statistics.mean(critical[i:i + 10]) for i in range(0, len(critical) - 9, 10)]
    print('critical host us, mean of each 10 windows (about 12 s): ' + ' '.join(f'{m:.1f}' for m in means))
    launch = [e[3] for e in engine]
    print(f'launch phase us: mean {statistics.mean(launch):.1f}, stdev {statistics.pstdev(launch):.1f}')
    fast = statistics.quantiles([p[1] for p in probe], n=10)[0]
    slow = [p for p in probe if engine[0][0] <= p[0] <= engine[-1][0] and p[1] > 1.3 * fast]
    print(f'probe python readings over 1.3x its fastest decile ({fast:.2f} ms) while the engine ran: '
          f'{len(slow)} of {sum(engine[0][0] <= p[0] <= engine[-1][0] for p in probe)}')
    steal_path = out / 'steal.txt'
    if steal_path.exists():
        stolen = [[float(x) for x in line.split()] for line in open(steal_path) if line.strip()]
        shares = [statistics.mean([s[3] for s in stolen if t0 < s[0] <= t1] or [0.0])
                  for (t0, *_), (t1, *_) in zip(engine, engine[1:])]
        print(f'stolen share of the CPU: mean {statistics.mean(shares):.4f}, max {max(shares):.4f}; correlation '
              f'with the critical host time: {pearson([e[1] for e in engine[1:]], shares):+.2f}')
    sm = gpu_clock(out / 'gpu_clocks.csv', engine[0][0], engine[-1][0])
    if sm:
        print(f'GPU SM clock while the engine ran: {min(sm):.0f}-{max(sm):.0f} MHz over {len(sm)} readings')


def gpu_clock(path, start, end):
    """nvidia-smi's SM clock readings (UTC stamps) between two wall-clock times."""
    if not path.exists():
        return []
    readings = re.finditer(r'^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+), (\d+) MHz', path.read_text(), re.M)
    stamp = lambda text: datetime.datetime.strptime(text, '%Y/%m/%d %H:%M:%S.%f').replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return [float(m.group(2)) for m in readings if start <= stamp(m.group(1)) <= end]


if __name__ == '__main__':
    main(Path(sys.argv[1]))
