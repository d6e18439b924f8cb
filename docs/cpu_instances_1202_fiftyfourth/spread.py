"""Within a process against between processes: four_rounds.txt's mean ms a step, and aslr.txt's spread either way."""
import statistics as st
from pathlib import Path

here = Path(__file__).parent
rows = [[float(x.split(':')[1]) for x in line.split()[1:]] for line in open(here / 'four_rounds.txt')]
within = st.mean(st.pvariance(r) for r in rows)
print(f'four rounds, {len(rows)} processes: variance within a process {within:.2f} ms^2; variance of the process means '
      f'{st.pvariance([st.mean(r) for r in rows]):.2f}, where round-to-round noise alone would give about '
      f'{within / (len(rows[0]) - 1):.2f}')
for tag in ('on', 'off'):
    ms = [float(line.split('step_ms=')[1].split()[0]) for line in open(here / 'aslr.txt') if line.startswith(tag)]
    print(f'randomisation {tag}: {min(ms):.1f}-{max(ms):.1f} ms a step, stdev {st.stdev(ms):.2f}')
