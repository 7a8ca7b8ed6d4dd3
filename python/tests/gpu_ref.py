"""Inputs and a float64 reference for the GPU tests (torch only, no FLA).

The reference is the token-by-token recurrence of docs/SPEC.md in float64,
on the inputs as the kernels read them (already rounded to bf16/fp16), with
the full forward's in-kernel steps done in float64 first.
"""
import torch
import torch.nn.functional as F

D = 128


def inputs(B=1, T=256, H=2, HV=4, dtype=torch.bfloat16, cu=None, seed=0, h0=True, device="cuda"):
    """The SPEC's recipe: q, k L2-normalised, v N(0, 1), g logsigmoid(N)/16,
    beta sigmoid(N), h0 N(0, 1)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    N = B if cu is None else len(cu) - 1

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    q = F.normalize(randn(B, T, H, D), dim=-1)
    k = F.normalize(randn(B, T, H, D), dim=-1)
    x = dict(
        q=q.to(dtype), k=k.to(dtype), v=randn(B, T, HV, D).to(dtype),
        g=F.logsigmoid(randn(B, T, HV)) / 16, beta=torch.sigmoid(randn(B, T, HV)),
        initial_state=randn(N, HV, D, D) if h0 else None,
    )
    if cu is not None:
        x["cu_seqlens"] = torch.tensor(cu, dtype=torch.int64)
    return {n: (t.to(device) if t is not None else None) for n, t in x.items()}


def reference(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None, dt_bias=None,
              use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, **_):
    """(o, ht) in float64: o [B, T, HV, 128], ht [N, HV, K, V]."""
    q, k, v, g, beta = (t.double() for t in (q, k, v, g, beta))
    B, T, H, _ = q.shape
    HV = v.shape[2]
    if use_qk_l2norm_in_kernel:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    if use_gate_in_kernel:
        g = -torch.exp(A_log.double()) * F.softplus(g + dt_bias.double())
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(beta) * (2 if allow_neg_eigval else 1)
    scale = D ** -0.5 if scale is None else scale
    rep = HV // H
    q, k = q.repeat_interleave(rep, dim=2) * scale, k.repeat_interleave(rep, dim=2)
    if cu_seqlens is None:
        bounds = [(b, 0, T) for b in range(B)]
    else:
        c = cu_seqlens.tolist()
        bounds = [(0, c[n], c[n + 1]) for n in range(len(c) - 1)]
    o = torch.zeros(B, T, HV, D, dtype=torch.float64, device=q.device)
    hts = []
    for n, (b, s, e) in enumerate(bounds):
        S = (initial_state[n].double().clone() if initial_state is not None
             else torch.zeros(HV, D, D, dtype=torch.float64, device=q.device))
        for t in range(s, e):
            S = S * torch.exp(g[b, t])[:, None, None]
            kt = k[b, t]  # [HV, K]
            u = (v[b, t] - torch.einsum("hkv,hk->hv", S, kt)) * beta[b, t][:, None]
            S = S + kt[:, :, None] * u[:, None, :]
            o[b, t] = torch.einsum("hkv,hk->hv", S, q[b, t])
        hts.append(S)
    return o, torch.stack(hts)


def errors(out, ref):
    """(ratio, max): RMS(out - ref) / RMS(ref) and max |out - ref|."""
    d = out.double() - ref
    return (d.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item(), d.abs().max().item()
