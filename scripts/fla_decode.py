"""Times FLA's fused_recurrent_gated_delta_rule on gdn's decode suite.

The comparison line of `gdn bench --decode`: run both in one session on
the same GPU. FLA is not part of gdn; put its source (the `fla` folder of
flash-linear-attention, e.g. v0.5.1) on PYTHONPATH:

    PYTHONPATH=/path/to/flash-linear-attention python3 scripts/fla_decode.py

Each case is a decode step of N sequences of T tokens (Hq query/key heads,
Hv value heads, head size 128): bf16 q, k, v, fp32 g and beta, q and k
L2-normalised in the kernel, an fp32 state read from initial_state and the
final state written (FLA writes it to a new tensor; gdn writes the slot in
place: the same bytes). Times are CUDA-event times of a CUDA graph of 20
calls (launch overheads out, as gdn bench's graph timing), min over 5
repetitions, per call; "copy" is a device-to-device copy of the state
bytes (read + write), the bandwidth line.
"""

import sys

import torch

# name, N (sequences), T (tokens each), Hq, Hv: the same list as
# cmd/gdn's decode suite.
CASES = [
    ("q35_b64", 64, 1, 16, 32),
    ("q35_b256", 256, 1, 16, 32),
    ("q35_b1024", 1024, 1, 16, 32),
    ("tp8_b256", 256, 1, 2, 8),
    ("q35_b256_t4", 256, 4, 16, 32),
]


def graph_ms(fn, calls=20, reps=5):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    best = float("inf")
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / calls)
    return best


def main():
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

    dev = torch.device("cuda")
    torch.manual_seed(0)
    print("%-12s %10s %10s %9s %9s" % ("case", "fla_ms", "copy_ms", "fla_GB/s", "copy_GB/s"))
    for name, n, t, hq, hv in CASES:
        q = torch.randn(n, t, hq, 128, device=dev, dtype=torch.bfloat16)
        k = torch.randn(n, t, hq, 128, device=dev, dtype=torch.bfloat16)
        v = torch.randn(n, t, hv, 128, device=dev, dtype=torch.bfloat16)
        g = torch.nn.functional.logsigmoid(torch.randn(n, t, hv, device=dev)) / 16
        beta = torch.sigmoid(torch.randn(n, t, hv, device=dev))
        h0 = torch.randn(n, hv, 128, 128, device=dev)
        dst = torch.empty_like(h0)

        def fla():
            fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                                             use_qk_l2norm_in_kernel=True)

        def copy():
            dst.copy_(h0)

        f, c = graph_ms(fla), graph_ms(copy)
        gb = 2 * h0.numel() * 4 / 1e9
        print("%-12s %10.4f %10.4f %9.0f %9.0f" % (name, f, c, gb / f * 1e3, gb / c * 1e3))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
