"""Lines up decode_times.py's step times with steal.py's readings: for each second, the mean ms a step of the
generate calls that ended in it, beside that second's stolen share; then how they move together.
    python3 steal_vs_step.py STEPS STEAL
"""
import statistics
import sys


def read(path):
    return [[float(x) for x in line.split()] for line in open(path) if line.strip()]


def pearson(a, b):
    ma, mb = statistics.mean(a), statistics.mean(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return cov / (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5


def main(steps_path, steal_path):
    steps, stat = read(steps_path), read(steal_path)
    seconds = []
    for before, (t, user, idle, steal) in zip(stat, stat[1:]):
        calls = [ms for end, ms in steps if before[0] < end <= t]
        if calls:
            seconds.append((statistics.mean(calls), steal, idle))
    ms, steal = [s[0] for s in seconds], [s[1] for s in seconds]
    print(f'{len(steps)} generate calls over {steps[-1][0] - steps[0][0]:.0f} s; {len(seconds)} seconds with a call')
    print(f'ms a step: median {statistics.median(ms):.2f}, min {min(ms):.2f}, max {max(ms):.2f}')
    print(f'stolen share of the CPU: mean {statistics.mean(steal):.4f}, max {max(steal):.4f}, '
          f'seconds with any: {sum(s > 0 for s in steal)} of {len(steal)}')
    print(f'correlation of ms a step with the stolen share: {pearson(ms, steal):+.2f}; '
          f'with the idle share: {pearson(ms, [s[2] for s in seconds]):+.2f}')
    quiet = [m for m, s in zip(ms, steal) if s == 0]
    stolen = [m for m, s in zip(ms, steal) if s > 0]
    if quiet and stolen:
        print(f'ms a step in seconds without steal: median {statistics.median(quiet):.2f} ({len(quiet)} s); '
              f'with some: {statistics.median(stolen):.2f} ({len(stolen)} s)')
    minute = [statistics.mean(ms[i:i + 60]) for i in range(0, len(ms) - 59, 60)]
    print('ms a step, mean of each minute: ' + ' '.join(f'{m:.2f}' for m in minute))


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
