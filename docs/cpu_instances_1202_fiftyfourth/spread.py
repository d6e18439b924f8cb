"""Within a process against between processes (four_rounds.txt, thp.txt), and aslr.txt's spread either way."""
import statistics as st
from pathlib import Path

here = Path(__file__).parent


def rounds(line):
    return [float(x.split(':')[1]) for x in line.split() if x[0].isdigit()]


def within_between(name, rows):
    within = st.mean(st.pvariance(r) for r in rows)
    print(f'{name}, {len(rows)} processes: mean {st.mean(map(st.mean, rows)):.2f} ms a step; variance within a '
          f'process {within:.2f} ms^2; variance of the process means {st.pvariance([st.mean(r) for r in rows]):.2f}, '
          f'where round-to-round noise alone would give about {within / (len(rows[0]) - 1):.2f}')


within_between('four rounds', [rounds(line) for line in open(here / 'four_rounds.txt')])
for tag in ('default', 'thp'):
    within_between(f'huge pages {tag}', [rounds(line) for line in open(here / 'thp.txt') if line.startswith(tag + ' ')])
for tag in ('on', 'off'):
    ms = [float(line.split('step_ms=')[1].split()[0]) for line in open(here / 'aslr.txt') if line.startswith(tag)]
    print(f'randomisation {tag}: {min(ms):.1f}-{max(ms):.1f} ms a step, stdev {st.stdev(ms):.2f}')
