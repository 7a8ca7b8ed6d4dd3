#!/usr/bin/env python3
"""check_run.py: calls `gdn run` the way a NumPy pipeline would, and checks it.

Core forward: it draws inputs of the recipe in docs/SPEC.md with NumPy (packed
variable-length sequences, grouped value heads, an initial state), computes
g_cumsum and A in float64, writes them to an .npz, runs `gdn run`, reads o and
ht back and compares them with a float64 recurrent reference computed here,
independently of gdn's Go reference, on the same bf16-rounded q, k, v.

Full forward: it writes what a model layer produces (q and k not normalised,
the gate's raw input a, A_log and dt_bias) and runs
`gdn run --full --l2norm --gate-in-kernel`; the reference normalises q and k
and computes g = -exp(A_log) softplus(a + dt_bias) itself.

    python3 examples/python/check_run.py path/to/gdn [workdir]

Needs numpy and a GPU; exits non-zero when an output misses a pass line of docs/SPEC.md.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

D, C = 128, 64


def round_bf16(x):
    """Round float32 values to bfloat16 (nearest even), returned as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def recipe(rng, lens, hq, hv):
    t = sum(lens)
    q = rng.standard_normal((1, t, hq, D))
    k = rng.standard_normal((1, t, hq, D))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, t, hv, D))
    g = -np.logaddexp(0.0, -rng.standard_normal((1, t, hv))) / 16  # logsigmoid / 16
    g[..., ::4] = 0.0  # a quarter of the value heads without decay
    beta = 1 / (1 + np.exp(-rng.standard_normal((1, t, hv))))
    h0 = rng.standard_normal((len(lens), hv, D, D))
    q, k, v = (round_bf16(x.astype(np.float32)).astype(np.float64) for x in (q, k, v))
    return q, k, v, g.astype(np.float32).astype(np.float64), beta.astype(np.float32).astype(np.float64), h0.astype(np.float32)


def chunk_prep(cu, k, g, beta, hq, hv):
    """g_cumsum (chunk-local) and A = (I + StrictLower(diag(beta) K K^T * Gamma))^-1."""
    t = k.shape[1]
    gc = np.zeros_like(g)
    A = np.zeros((1, t, hv, C))
    for n in range(len(cu) - 1):
        for s in range(cu[n], cu[n + 1], C):
            e = min(s + C, cu[n + 1])
            gc[0, s:e] = np.cumsum(g[0, s:e], axis=0)
            for h in range(hv):
                kk = k[0, s:e, h // (hv // hq)]
                gam = np.exp(gc[0, s:e, h][:, None] - gc[0, s:e, h][None, :])
                L = np.tril(beta[0, s:e, h][:, None] * (kk @ kk.T) * gam, -1)
                A[0, s:e, h, : e - s] = np.linalg.inv(np.eye(e - s) + L)
    return gc, A


def recurrent(cu, q, k, v, g, beta, h0, hq, hv, scale):
    o = np.zeros_like(v)
    ht = np.zeros((len(cu) - 1, hv, D, D))
    for n in range(len(cu) - 1):
        for h in range(hv):
            S = h0[n, h].astype(np.float64).copy()
            for t in range(cu[n], cu[n + 1]):
                kt, qt, vt = k[0, t, h // (hv // hq)], q[0, t, h // (hv // hq)], v[0, t, h]
                S = np.exp(g[0, t, h]) * S
                S = S + beta[0, t, h] * np.outer(kt, vt - S.T @ kt)
                o[0, t, h] = scale * (S.T @ qt)
            ht[n, h] = S
    return o, ht


def l2norm(x):
    """Every 128-vector x / sqrt(sum(x^2) + 1e-6), as FLA's use_qk_l2norm_in_kernel."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + 1e-6)


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def full_inputs(rng, lens, hq, hv):
    """A layer's raw outputs: q, k unnormalised, v, the gate's input a, beta,
    per-head A_log and dt_bias (A over [1, 16], time steps 0.001 to 0.1)."""
    t = sum(lens)
    f32 = lambda x: np.asarray(x, dtype=np.float32).astype(np.float64)
    q, k = (round_bf16(3 * rng.standard_normal((1, t, hq, D)).astype(np.float32)).astype(np.float64) for _ in range(2))
    v = round_bf16(rng.standard_normal((1, t, hv, D)).astype(np.float32)).astype(np.float64)
    a = f32(rng.standard_normal((1, t, hv)))
    beta = f32(1 / (1 + np.exp(-rng.standard_normal((1, t, hv)))))
    a_log = f32(np.log(np.linspace(1, 16, hv)))
    dt = np.geomspace(1e-3, 1e-1, hv)
    dt_bias = f32(dt + np.log(-np.expm1(-dt)))  # softplus(dt_bias) = dt
    return q, k, v, a, beta, a_log, dt_bias


def errors(out, ref):
    diff = out.astype(np.float64) - ref
    rms = np.sqrt(np.mean(ref ** 2))
    return np.sqrt(np.mean(diff ** 2)) / rms, np.max(np.abs(diff)), int(np.sum(~np.isfinite(out)))


def check(gdn, flags, inp, outp, o_ref, ht_ref):
    """Runs gdn run with flags on inp and holds o and ht to docs/SPEC.md's pass lines."""
    subprocess.run([gdn, "run", "--in", inp, "--out", outp] + flags, check=True)
    got = np.load(outp)
    ok = True
    for name, out, ref, ratio_max, abs_max in (("o", got["o"], o_ref, 6e-3, 2e-2), ("ht", got["ht"], ht_ref, 4e-3, 1.5e-2)):
        r, m, bad = errors(out, ref)
        passed = r <= ratio_max and m <= abs_max and bad == 0
        ok &= passed
        print(f"  {name}: shape {out.shape} error ratio {r:.3e} max abs {m:.3e} non-finite {bad}: {'ok' if passed else 'FAIL'}", flush=True)
    return ok


def main():
    gdn = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    rng = np.random.default_rng(2026)
    lens, hq, hv, scale = [300, 1, 0, 129], 2, 6, 0.1
    cu = np.cumsum([0] + lens)
    f32 = lambda x: np.ascontiguousarray(x, dtype=np.float32)
    outp = os.path.join(work, "out.npz")

    print("core forward (gdn run): g_cumsum and A given", flush=True)
    q, k, v, g, beta, h0 = recipe(rng, lens, hq, hv)
    gc, A = chunk_prep(cu, k, g, beta, hq, hv)
    inp = os.path.join(work, "in.npz")
    np.savez(inp, q=f32(q), k=f32(k), v=f32(v), g=f32(gc), beta=f32(beta), A=f32(A), h0=f32(h0),
             cu_seqlens=cu.astype(np.int64), scale=np.float32(scale))
    o_ref, ht_ref = recurrent(cu, q, k, v, g, beta, h0, hq, hv, scale)
    ok = check(gdn, [], inp, outp, o_ref, ht_ref)

    print("full forward (gdn run --full --l2norm --gate-in-kernel): a layer's raw outputs", flush=True)
    q, k, v, a, beta, a_log, dt_bias = full_inputs(rng, lens, hq, hv)
    inp = os.path.join(work, "in_full.npz")
    np.savez(inp, q=f32(q), k=f32(k), v=f32(v), g=f32(a), beta=f32(beta), A_log=f32(a_log), dt_bias=f32(dt_bias),
             h0=f32(h0), cu_seqlens=cu.astype(np.int32), scale=np.float32(scale))
    g = -np.exp(a_log) * softplus(a + dt_bias)
    o_ref, ht_ref = recurrent(cu, l2norm(q), l2norm(k), v, g, beta, h0, hq, hv, scale)
    ok &= check(gdn, ["--full", "--l2norm", "--gate-in-kernel"], inp, outp, o_ref, ht_ref)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
