"""Mean host phases a decode step, per engine and cell, from a sweep's PHASES lines (phases_every.patch).

    python3 phases.py calls/call1/phases_c1_8.phases old     (main: the cost record after publishing)
    python3 phases.py calls/call3/after_c1_64.phases new     (the cost record behind the next launch)

Lines are grouped by their sample+wait phase (the device's step): a gap of more than 40 us between sorted values
starts a new group, so cells whose steps take nearly as long share one (c = 4 and 8 in call 3), and a line whose
2,000 steps straddle two cells falls in one of them. "critical" is the host time the device waits on: every
phase but the sync (sample + wait) and what runs between the launch and the sync (plan_ahead; in the new code also
the cost record and the step's k).
"""
import re
import statistics
import sys

OLD = {0: 'schedule', 1: 'build', 2: 'launch', 3: 'plan_ahead', 4: 'sample+wait', 5: 'step k', 6: 'apply',
       7: 'draft_next', 8: 'commit', 9: 'count', 10: 'publish', 11: 'cost record'}
NEW = {0: 'schedule', 1: 'build', 2: 'launch', 11: 'cost record + step k', 3: 'plan_ahead', 4: 'sample+wait',
       6: 'apply', 7: 'draft_next', 8: 'commit', 9: 'count', 10: 'publish', 5: 'keep cost'}
WINDOW = {'old': {3, 4}, 'new': {3, 4, 11}}


def read(path):
    rows, instance = [], -1
    for line in open(path):
        if ':$ ' in line or line.startswith('$ '):
            instance += 1
            continue
        m = re.search(r'PHASES (\w+) .* n=\d+ (.*)', line)
        if m:
            rows.append((m.group(1), instance, [float(x.split(':')[1]) for x in m.group(2).split()]))
    return rows


def main(path, code):
    names, window = (OLD if code == 'old' else NEW), WINDOW[code]
    rows = read(path)
    print(f'{path} ({code} code): phases in us a decode step, mean over the lines of each group')
    print('| engine | lines | sample+wait | ' + ' | '.join(n for i, n in names.items() if i != 4) + ' | critical |')
    for lo, hi in bands(rows):
        for engine in ('k0', 'adaptive'):
            sel = [v for e, _, v in rows if e == engine and lo <= v[4] < hi]
            if not sel:
                continue
            mean = {i: statistics.mean(v[i] for v in sel) for i in range(16)}
            critical = sum(mean[i] for i in names if i not in window)
            cells = ' | '.join(f'{mean[i]:.2f}' for i in names if i != 4)
            print(f'| {engine} | {len(sel)} | {mean[4]:.0f} | {cells} | {critical:.1f} |')


def bands(rows):
    waits = sorted(v[4] for _, _, v in rows)
    cuts = [(b - a, (a + b) / 2) for a, b in zip(waits, waits[1:]) if b - a > 40]
    edges = [0.0] + sorted(c for _, c in cuts) + [1e9]
    return list(zip(edges, edges[1:]))


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
