# Adaptive TPOT speedup against k = 0 per run and batch (median of the runs, and pooled: TPOTs summed), from the
# JSON files the glob given names: .venv/bin/python analyse.py "docs/cpu_class_known_1130_thirtyninth/t1.5_*.json"
import json,glob,statistics as st,sys
pat=sys.argv[1]
rows={}
for f in sorted(glob.glob(pat)):
    d=json.load(open(f))
    b=f.split('_')[-2]
    rs={(x['policy'],x['batch']):x for x in d['results']}
    line=[]
    for bb in (1,8,32,64):
        a=rs[('adaptive',bb)]; z=rs[('fixed',bb)]
        r=z['tpot_ms']/a['tpot_ms']; rows.setdefault((b,bb),[]).append((r,z['tpot_ms'],a['tpot_ms']))
        line.append('b%d %.3f (tgt %.3f, draft %.2f, %s)'%(bb,r,a['target_ms_per_step']/z['target_ms_per_step'],a['draft_ms_per_step'],a['steps_by_k']))
    print(f.split('/')[-1], ' | '.join(line))
for k,v in sorted(rows.items()):
    print(k, 'median %.3f pooled %.3f n=%d'%(st.median(x[0] for x in v), sum(x[1] for x in v)/sum(x[2] for x in v), len(v)))
