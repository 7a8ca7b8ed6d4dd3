"""GPU tests of the package: against the float64 reference, against FLA when
it is importable, CUDA-graph capture and replay, and 8 threads on their own
streams. Skipped without torch, a GPU of compute capability 9.0 or libgdn.

    make python && python3 -m unittest python/tests/test_gpu.py -v
"""
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

try:
    import torch
except ImportError:
    torch = None

import gdn  # noqa: E402


def _why_skip():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if torch.cuda.get_device_capability() != (9, 0):
        return "gdn's kernels need compute capability 9.0 (H100, H200, H20, GH200)"
    return None


SKIP = _why_skip()
if SKIP is None:
    from gpu_ref import errors, inputs, reference
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
    except ImportError:
        fla_chunk = None

# docs/SPEC.md's pass lines: (ratio, max) for o and for ht.
PASS_O, PASS_HT = (6e-3, 2e-2), (4e-3, 1.5e-2)


@unittest.skipIf(SKIP, SKIP or "")
class ReferenceTest(unittest.TestCase):
    def check(self, name, out, ref, line):
        self.assertFalse(torch.isnan(out).any() or torch.isinf(out).any(), f"{name}: NaN or Inf")
        ratio, mx = errors(out, ref)
        self.assertLessEqual(ratio, line[0], f"{name}: ratio {ratio:.2e}")
        self.assertLessEqual(mx, line[1], f"{name}: max {mx:.2e}")

    def run_case(self, x, **opts):
        o, ht = gdn.chunk_gated_delta_rule(**x, output_final_state=True, **opts)
        torch.cuda.synchronize()
        ro, rht = reference(**x, **opts)
        self.check("o", o, ro, PASS_O)
        self.check("ht", ht, rht, PASS_HT)
        self.assertEqual(o.dtype, x["v"].dtype)
        self.assertEqual(ht.dtype, torch.float32)
        return o, ht

    def test_bf16_batched(self):
        self.run_case(inputs(B=2, T=200, H=2, HV=4))

    def test_fp16_no_initial_state(self):
        x = inputs(B=1, T=130, H=4, HV=4, dtype=torch.float16, h0=False)
        self.run_case(x)

    def test_varlen(self):
        x = inputs(T=300, cu=[0, 1, 64, 65, 300])
        self.run_case(x)
        self.run_case(x, cu_seqlens_cpu=[0, 1, 64, 65, 300])

    def test_in_kernel_steps(self):
        x = inputs(T=192, H=2, HV=8)
        x["q"], x["k"] = x["q"] * 3, x["k"] * 0.5  # not normalised: the kernel does it
        gen = torch.Generator(device="cpu").manual_seed(1)
        x["g"] = torch.randn(x["g"].shape, generator=gen).cuda()  # the gate's raw input a
        x["beta"] = torch.randn(x["beta"].shape, generator=gen).cuda()  # beta's logits
        opts = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                    A_log=torch.log(torch.rand(8, generator=gen) * 16 + 1).cuda(),
                    dt_bias=torch.randn(8, generator=gen).cuda(), use_beta_sigmoid_in_kernel=True)
        self.run_case(x, **opts)
        self.run_case(x, allow_neg_eigval=True, **opts)

    def test_no_dt_bias_is_zero_bias(self):
        # FLA's use_gate_in_kernel without dt_bias: no bias, bit for bit a
        # zero dt_bias; on torch's current stream and on a stream of its own.
        x = inputs(T=130, H=2, HV=4)
        gen = torch.Generator(device="cpu").manual_seed(2)
        x["g"] = torch.randn(x["g"].shape, generator=gen).cuda()
        a_log = torch.log(torch.rand(4, generator=gen) * 16 + 1).cuda()
        opts = dict(output_final_state=True, use_gate_in_kernel=True, A_log=a_log)
        want = gdn.chunk_gated_delta_rule(**x, dt_bias=torch.zeros(4, device="cuda"), **opts)
        got = gdn.chunk_gated_delta_rule(**x, **opts)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        got_side = gdn.chunk_gated_delta_rule(**x, stream=side.cuda_stream, **opts)
        side.synchronize()
        torch.cuda.synchronize()
        for a, b in ((want, got), (want, got_side)):
            self.assertTrue(torch.equal(a[0], b[0]))
            self.assertTrue(torch.equal(a[1], b[1]))

    def test_state_v_first(self):
        x = inputs(T=100)
        o, ht = gdn.chunk_gated_delta_rule(**x, output_final_state=True)
        x["initial_state"] = x["initial_state"].transpose(-1, -2).contiguous()
        o2, ht2 = gdn.chunk_gated_delta_rule(**x, output_final_state=True, state_v_first=True)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(o, o2))
        self.assertTrue(torch.equal(ht, ht2.transpose(-1, -2)))

    def test_no_final_state(self):
        o, ht = gdn.chunk_gated_delta_rule(**inputs(T=64))
        self.assertIsNone(ht)

    def test_build_info(self):
        # The loaded library names itself and was built with the cuda tag.
        line = gdn.build_info()
        self.assertTrue(line.startswith("libgdn "), line)
        self.assertIn("tags cuda", line)
        self.assertNotIn("no CUDA", line)

    def test_backward_raises(self):
        x = inputs(T=64)
        x["q"].requires_grad_(True)
        o, _ = gdn.chunk_gated_delta_rule(**x)
        with self.assertRaises(NotImplementedError):
            o.float().sum().backward()

    def test_wrong_device_and_layout(self):
        x = inputs(T=64)
        with self.assertRaises(gdn.ArgumentError) as cm:
            gdn.chunk_gated_delta_rule(**{**x, "q": x["q"].cpu()})
        self.assertEqual(cm.exception.arg, "q")
        with self.assertRaises(gdn.ArgumentError) as cm:
            gdn.chunk_gated_delta_rule(**{**x, "k": x["k"].transpose(1, 2).contiguous().transpose(1, 2)})
        self.assertEqual(cm.exception.arg, "k")

    def test_decode(self):
        x = inputs(B=3, T=1, H=2, HV=4)
        pool = torch.randn(5, 4, 128, 128, device="cuda")
        slots = torch.tensor([4, -1, 1], dtype=torch.int32, device="cuda")
        before = pool.clone()
        o = gdn.decode(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, slots, slots_cpu=[4, -1, 1])
        torch.cuda.synchronize()
        h0 = torch.stack([before[4], torch.zeros_like(before[0]), before[1]])
        ro, rht = reference(**{**x, "initial_state": h0})
        self.check("o", o, ro, PASS_O)
        self.check("slot 4", pool[4], rht[0], PASS_HT)
        self.check("slot 1", pool[1], rht[2], PASS_HT)
        for s in (0, 2, 3):
            self.assertTrue(torch.equal(pool[s], before[s]), f"slot {s} changed")


@unittest.skipIf(SKIP or fla_chunk is None, SKIP or "FLA is not installed")
class FLATest(unittest.TestCase):
    def test_against_fla(self):
        # Both against the float64 reference: gdn inside SPEC's lines and no
        # more than 1.5x FLA's error (FLA's accuracy is what the lines sit at).
        for cu in (None, [0, 100, 1000, 4096]):
            x = inputs(T=4096, H=4, HV=8, cu=cu)
            o, ht = gdn.chunk_gated_delta_rule(**x, output_final_state=True)
            fo, fht = fla_chunk(**x, output_final_state=True)
            torch.cuda.synchronize()
            ro, rht = reference(**x)
            for name, a, b, r in (("o", o, fo, ro), ("ht", ht, fht, rht)):
                ea, eb = errors(a, r)[0], errors(b, r)[0]
                self.assertLessEqual(ea, max(1.5 * eb, 1e-3), f"{name} cu={cu}: gdn {ea:.2e}, FLA {eb:.2e}")


@unittest.skipIf(SKIP, SKIP or "")
class ConcurrencyTest(unittest.TestCase):
    def test_cuda_graph_capture_and_replay(self):
        cu = [0, 70, 300]
        x = inputs(T=300, cu=cu)
        eager_o, eager_ht = gdn.chunk_gated_delta_rule(**x, output_final_state=True, cu_seqlens_cpu=cu)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # a warm-up call outside the capture, as torch advises
            gdn.chunk_gated_delta_rule(**x, output_final_state=True, cu_seqlens_cpu=cu)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o, ht = gdn.chunk_gated_delta_rule(**x, output_final_state=True, cu_seqlens_cpu=cu)
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(o, eager_o))
        self.assertTrue(torch.equal(ht, eager_ht))
        # New inputs in the same buffers: the replay computes on them.
        y = inputs(T=300, cu=cu, seed=7)
        for n in ("q", "k", "v", "g", "beta", "initial_state"):
            x[n].copy_(y[n])
        graph.replay()
        want_o, want_ht = gdn.chunk_gated_delta_rule(**y, output_final_state=True, cu_seqlens_cpu=cu)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(o, want_o))
        self.assertTrue(torch.equal(ht, want_ht))

    def test_eight_threads_on_their_streams(self):
        cases = [inputs(T=128 + 64 * i, seed=i) for i in range(8)]
        want = [gdn.chunk_gated_delta_rule(**x, output_final_state=True) for x in cases]
        torch.cuda.synchronize()
        got, failures = [None] * 8, []

        def work(i):
            try:
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    for _ in range(20):
                        got[i] = gdn.chunk_gated_delta_rule(**cases[i], output_final_state=True)
                s.synchronize()
            except Exception as e:  # reported below, on the main thread
                failures.append((i, e))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        for i in range(8):
            self.assertTrue(torch.equal(got[i][0], want[i][0]), f"thread {i}: o differs")
            self.assertTrue(torch.equal(got[i][1], want[i][1]), f"thread {i}: ht differs")


if __name__ == "__main__":
    unittest.main()
