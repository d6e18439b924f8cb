import os
import sys
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(HERE, '../../../tests'))
from replay import evaluate, cpp
from parse import parse
from models import ScalingCost, Bucketed
b = int(sys.argv[1])
def show(name, r): print(name, ' '.join(f'{k}:{v[0]:+.3f}/{v[1]:.3f}' for k, v in r.items()))
for p in sys.argv[2:]:
    runs = parse(p); print(p)
    show('cpp', evaluate(cpp, runs, b))
    for q in ():
        show(f'scaling q={q}', evaluate(lambda: Bucketed(lambda: ScalingCost(q=q)), runs, b))
