# Throwaway experiment (2026-11-29), kept as run: per-layer forward time in a fine-tune step vs its probe (see ../NOTES.md).
"""Per-layer forward time inside the fine-tune step (hooks) vs the layer's probe cost (composition JSON)."""
import json, sys, time, statistics, collections
import torch
torch.set_num_threads(1)
from thor_sdk.layers import layers_of
from thor_sdk.probes import Probe
from thor_sdk.harness.whole_model import resolve_model, build_training
from thor_sdk.harness.torch_trainer import TorchTrainer
model, pat, js = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(js)); n = d['nets'][0]
cost = {pid: statistics.median(c['costs_s'][pid] for c in n['cycles']) for pid in n['cycles'][0]['costs_s']}
L = layers_of(model, trainable=[pat]).layers
src = resolve_model(model, trainable=[pat])
t = build_training(src, 16, 0)
tr = TorchTrainer(t.module, t.x, t.y, t.loss_fn)
mods = dict(t.module.named_modules())
rec = collections.defaultdict(list); start = {}
def pre(name):
    def f(m, i): start[name] = time.perf_counter()
    return f
def post(name):
    def f(m, i, o): rec[name].append(time.perf_counter() - start[name])
    return f
names = [l['name'] for l in L]
for nm in set(names):
    if nm in mods:
        mods[nm].register_forward_pre_hook(pre(nm)); mods[nm].register_forward_hook(post(nm))
for _ in range(20): tr.step()
rec.clear()
t0=time.perf_counter()
for _ in range(300): tr.step()
step = (time.perf_counter()-t0)/300
by = collections.defaultdict(lambda: [0.0, 0.0, 0])
rows=[]
for l in L:
    if l['name'] not in rec: continue
    p = Probe(l['kind'], l['config'], 16, l['role'])
    if p.id not in cost: continue
    ctx = statistics.median(rec[l['name']]); pc = cost[p.id]
    key = (l['kind'], l['role'], 'frozen' if l['config'].get('frozen') else '')
    by[key][0] += ctx; by[key][1] += pc; by[key][2] += 1
    rows.append((l['name'], l['kind'], ctx*1e3, pc*1e3))
print(f"step {step*1e3:.2f} ms (hooks on)")
tc = sum(v[0] for v in by.values()); tp = sum(v[1] for v in by.values())
print(f"in-context forward sum {tc*1e3:.2f} ms, probes {tp*1e3:.2f} ms, ratio {tp/tc:.2f}")
for k, v in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(k, v[2], f"ctx {v[0]*1e3:.2f} probe {v[1]*1e3:.2f} ratio {v[1]/v[0]:.2f}")
if len(sys.argv) > 4:
    for r in rows: print(*r)
