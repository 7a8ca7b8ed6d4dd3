#!/usr/bin/env python3
"""fla_swap.py: swaps FLA's chunk_gated_delta_rule for gdn's in a
Qwen3.5-shaped Gated DeltaNet layer and prints both times and both errors.

The layer is what a serving stack hands the kernel: 16 query/key heads and
32 value heads of dimension 128 in bf16, q and k not yet normalised, the
gate's raw input a with A_log and dt_bias, beta = sigmoid(b), prompts packed
with cu_seqlens (--lens), from a zero state, returning the final state. Both
calls run on the same tensors and stream, timed with CUDA events over
repeated calls (the mean of --iters after --warmup); errors are against a
float64 recurrence on 4 of the 32 value heads (a head depends on no other).

    make python
    PYTHONPATH=python python3 examples/python/fla_swap.py [--lens 4096,4096,...]

Needs torch and a compute capability 9.0 GPU; FLA (flash-linear-attention)
is timed when importable, else gdn alone.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))
import gdn  # noqa: E402
from gpu_ref import errors, reference  # noqa: E402

try:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
except ImportError:
    fla_chunk = None

H, HV, D = 16, 32, 128


def layer_inputs(lens, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    T = sum(lens)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    x = dict(
        q=randn(1, T, H, D).bfloat16(), k=randn(1, T, H, D).bfloat16(), v=randn(1, T, HV, D).bfloat16(),
        g=randn(1, T, HV),  # the gate's raw input a
        beta=torch.sigmoid(randn(1, T, HV)).bfloat16(),
        A_log=torch.log(torch.rand(HV, generator=gen) * 15 + 1), dt_bias=randn(HV) * 0.5,
        cu_seqlens=torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int64),
    )
    return {n: t.cuda() for n, t in x.items()}, dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                                      output_final_state=True)


def time_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def head_slice_errors(x, opts, o, ht, heads=(0, 10, 20, 31)):
    """o's and ht's errors on a few value heads (and the q/k heads they read)."""
    vh = torch.tensor(heads, device="cuda")
    qh = vh // (HV // H)
    sub = dict(q=x["q"][:, :, qh], k=x["k"][:, :, qh], v=x["v"][:, :, vh], g=x["g"][:, :, vh],
               beta=x["beta"][:, :, vh], A_log=x["A_log"][vh], dt_bias=x["dt_bias"][vh], cu_seqlens=x["cu_seqlens"])
    ro, rht = reference(**sub, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True)
    return errors(o[:, :, vh], ro), errors(ht[:, vh], rht)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lens", default=",".join(["4096"] * 8), help="prompt lengths, packed (default: 8 x 4096)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--no-check", action="store_true", help="skip the float64 reference (slow for long prompts)")
    a = p.parse_args()
    lens = [int(s) for s in a.lens.split(",")]
    x, opts = layer_inputs(lens)
    cu_cpu = x["cu_seqlens"].tolist()
    print(f"{torch.cuda.get_device_name()}: {len(lens)} prompts, {sum(lens)} tokens, H={H} HV={HV} bf16")

    calls = {"gdn": lambda: gdn.chunk_gated_delta_rule(**x, **opts, cu_seqlens_cpu=cu_cpu)}
    if fla_chunk is not None:
        calls["FLA"] = lambda: fla_chunk(**x, **opts)
    else:
        print("FLA is not importable: timing gdn alone")
    with torch.no_grad():
        for name, fn in calls.items():
            ms = time_ms(fn, a.warmup, a.iters)
            line = f"{name:4s} {ms:8.3f} ms"
            if not a.no_check:
                o, ht = fn()
                torch.cuda.synchronize()
                (ro, mo), (rh, mh) = head_slice_errors(x, opts, o, ht)
                line += f"   o ratio {ro:.2e} max {mo:.2e}   ht ratio {rh:.2e} max {mh:.2e}"
            print(line)


if __name__ == "__main__":
    main()
