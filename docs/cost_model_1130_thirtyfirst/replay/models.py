import os
import numpy as np
FORGET, AGING = 0.99, 10.0
def age_after(steps): return 1.0 + AGING * max(0, steps - 1)

def nnls_normal(xtx, xty, nonneg, prev):
    n = len(xty); active = [xtx[i, i] > 0 for i in range(n)]
    coef = prev
    for _ in range(n):
        idx = [i for i in range(n) if active[i]]
        if not idx: coef = np.zeros(n); break
        try:
            sol = np.linalg.solve(xtx[np.ix_(idx, idx)], xty[idx])
        except np.linalg.LinAlgError:
            return prev
        c = np.zeros(n); c[idx] = sol; coef = c
        worst = None
        for i in idx:
            if nonneg[i] and c[i] < 0 and (worst is None or c[i] < c[worst]): worst = i
        if worst is None: break
        active[worst] = False
    return np.array([max(v, 0.0) if nonneg[i] else v for i, v in enumerate(coef)])

class Mixed:
    """y = a + b.x + u[key], a, b >= 0, ridge lam on u; per-key sufficient stats aged by the key's gap."""
    def __init__(self, nfeat, lam, free_slopes=False):
        self.n, self.lam, self.keys, self.coef, self.free = nfeat, lam, {}, None, free_slopes
    def add(self, key, x, y, steps):
        z = np.array([1.0, *x])
        st = self.keys.get(key)
        if st is None: st = self.keys[key] = dict(xtx=np.zeros((self.n, self.n)), xty=np.zeros(self.n), at=steps)
        f = FORGET ** age_after(steps - st['at'])
        st['xtx'] = f * st['xtx'] + np.outer(z, z); st['xty'] = f * st['xty'] + z * y; st['at'] = steps
        self.solve()
    def solve(self):
        keys = sorted(self.keys); m = self.n + len(keys)
        A = np.zeros((m, m)); r = np.zeros(m)
        for j, k in enumerate(keys):
            S, s = self.keys[k]['xtx'], self.keys[k]['xty']; u = self.n + j
            A[:self.n, :self.n] += S; r[:self.n] += s
            A[:self.n, u] += S[:, 0]; A[u, :self.n] += S[0, :]; A[u, u] += S[0, 0] + self.lam; r[u] += s[0]
        nonneg = [True] + [not self.free] * (self.n - 1) + [False] * len(keys)
        prev = self.coef if self.coef is not None and len(self.coef) == m else np.zeros(m)
        self.coef = nnls_normal(A, r, nonneg, prev); self.keyidx = {k: self.n + j for j, k in enumerate(keys)}
    def predict(self, key, x):
        if self.coef is None: return 0.0
        y = self.coef[0] + float(np.dot(self.coef[1:self.n], x))
        if key in self.keyidx: y += self.coef[self.keyidx[key]]
        return max(0.0, y)

class MixedCost:
    def __init__(self, lam, free=False):
        self.v, self.d, self.steps = Mixed(3, lam, free), Mixed(4, lam, free), 0
    def record_verify(self, n, k, rows, ctx, s): self.steps += 1; self.v.add(k, [rows, ctx], s, self.steps)
    def record_draft(self, n, fill, rec, rr, s): self.d.add(rec, [fill, rec, rr], s, self.steps)
    def verify_seconds(self, n, k, rows, ctx): return self.v.predict(k, [rows, ctx])
    def draft_seconds(self, n, fill, rec, rr): return self.d.predict(rec, [fill, rec, rr]) if fill > 0 else 0.0

class Drift:
    """y/scale = d + b.x + u[key] + noise; only d drifts (random walk, var q per step), u[key] ~ N(0, su2)
    a priori and drifts slowly (qu per step); b diffuse. Kalman filter."""
    def __init__(self, nfeat, q=0.003, R=0.02, su2=0.09, qu=1e-5, big=1e4):
        self.n, self.q, self.R, self.su2, self.qu, self.big = nfeat, q, R, su2, qu, big
        self.keys = {}; self.th = np.zeros(nfeat); self.P = np.eye(nfeat) * big; self.scale = None
    def _key(self, k):
        if k not in self.keys:
            self.keys[k] = len(self.th)
            m = len(self.th)
            P = np.zeros((m + 1, m + 1)); P[:m, :m] = self.P; P[m, m] = self.su2
            self.P = P; self.th = np.append(self.th, 0.0)
        return self.keys[k]
    def h(self, key, x, grow=False):
        hv = np.zeros(len(self.th)); hv[0] = 1; hv[1:self.n] = x
        i = self._key(key) if grow else self.keys.get(key)
        if i is not None: hv[i] = 1
        return hv
    def step(self):
        self.P[0, 0] += self.q
        for i in self.keys.values(): self.P[i, i] += self.qu
    def add(self, key, x, y):
        if self.scale is None: self.scale = y
        self._key(key)
        hv = self.h(key, x); z = y / self.scale
        S = hv @ self.P @ hv + self.R; K = self.P @ hv / S
        self.th = self.th + K * (z - hv @ self.th); self.P = self.P - np.outer(K, hv @ self.P)
    def predict(self, key, x):
        if self.scale is None: return 0.0
        return max(0.0, float(self.h(key, x) @ self.th) * self.scale)

class DriftCost:
    def __init__(self, **kw):
        self.v, self.d = Drift(3, **kw), Drift(4, **kw)
    def record_verify(self, n, k, rows, ctx, s):
        self.v.step(); self.d.step(); self.v.add(k, [rows, ctx], s)
    def record_draft(self, n, fill, rec, rr, s): self.d.add(rec, [fill, rec, rr], s)
    def verify_seconds(self, n, k, rows, ctx): return self.v.predict(k, [rows, ctx])
    def draft_seconds(self, n, fill, rec, rr): return self.d.predict(rec, [fill, rec, rr]) if fill > 0 else 0.0

class Scaling(Drift):
    """Like Drift, but the drift scales the whole state (every cost alike): P += gap * q * th th^T; noise relative."""
    def __init__(self, nfeat, q=0.002, r=0.02, su2=0.09, qu=1e-5, big=1e4):
        super().__init__(nfeat, q=q, R=r, su2=su2, qu=qu, big=big); self.t = None; self.xs = None
    def step(self): pass
    def add(self, key, x, y, t=None):
        if self.scale is None: self.scale = y; self.xs = [v if v > 0 else 1.0 for v in x]
        self._key(key)
        gap = 1 if t is None or self.t is None else max(0, t - self.t); self.t = t
        self.P = self.P + gap * self.q * np.outer(self.th, self.th)
        for i in self.keys.values(): self.P[i, i] += gap * self.qu
        hv = self.h(key, [a / b for a, b in zip(x, self.xs)]); z = y / self.scale
        yh = hv @ self.th; R = self.R * max(yh, 0.1) ** 2
        S = hv @ self.P @ hv + R; K = self.P @ hv / S
        self.th = self.th + K * (z - yh); self.P = self.P - np.outer(K, hv @ self.P); self.P = (self.P + self.P.T) / 2
    def predict(self, key, x):
        if self.scale is None: return 0.0
        return max(0.0, float(self.h(key, [a / b for a, b in zip(x, self.xs)]) @ self.th) * self.scale)

class ScalingCost:
    def __init__(self, **kw):
        self.v, self.d, self.steps = Scaling(3, **kw), Scaling(4, **kw), 0
    def record_verify(self, n, k, rows, ctx, s): self.steps += 1; self.v.add(k, [rows, ctx], s, self.steps)
    def record_draft(self, n, fill, rec, rr, s): self.d.add(rec, [fill, rec, rr], s, self.steps)
    def verify_seconds(self, n, k, rows, ctx): return self.v.predict(k, [rows, ctx])
    def draft_seconds(self, n, fill, rec, rr): return self.d.predict(rec, [fill, rec, rr]) if fill > 0 else 0.0

class Bucketed:
    def __init__(self, make): self.make, self.b = make, {}
    def _m(self, n): return self.b.setdefault(n.bit_length() - 1, self.make())
    def record_verify(self, n, *a): self._m(n).record_verify(n, *a)
    def record_draft(self, n, *a): self._m(n).record_draft(n, *a)
    def verify_seconds(self, n, *a): return self._m(n).verify_seconds(n, *a)
    def draft_seconds(self, n, *a): return self._m(n).draft_seconds(n, *a)
