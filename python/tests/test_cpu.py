"""The package's tests that need neither torch nor a GPU (CI runs them):
import, the clear error without a GPU, the argument checks, and libgdn's
ABI (built without CUDA: GDN_TEST_NOCUDA_LIBRARY) against the ctypes mirrors.

    python3 -m unittest discover -s python/tests
"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import gdn  # noqa: E402
from gdn import _abi, _lib  # noqa: E402
from fakes import FakeCuda, full_inputs  # noqa: E402


def gpu_usable():
    try:
        _lib.init_driver()
        return True
    except gdn.GdnUnavailable:
        return False


class ImportTest(unittest.TestCase):
    def test_import_without_torch_or_gpu(self):
        # In a fresh interpreter: importing gdn loads neither torch nor libgdn.
        code = "import sys, gdn; print('torch' in sys.modules, gdn._lib._lib is None, callable(gdn.chunk_gated_delta_rule))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": os.path.dirname(HERE)}, check=True)
        self.assertEqual(out.stdout.split(), ["False", "True", "True"])


@unittest.skipIf(gpu_usable(), "a GPU is usable here: the no-GPU path cannot be seen")
class NoGPUTest(unittest.TestCase):
    def run_call(self, env):
        """A valid call in a fresh process: it must raise GdnUnavailable and
        the process go on (libgdn's CUDA binding would exit it)."""
        code = ("import sys; sys.path.insert(0, %r); import gdn, fakes\n"
                "try:\n    gdn.chunk_gated_delta_rule(**fakes.full_inputs())\n"
                "except gdn.GdnUnavailable as e:\n    print('unavailable:', e)\n"
                "print('still running')\n") % HERE
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": os.path.dirname(HERE), **env})

    def test_no_driver(self):
        out = self.run_call({"LD_LIBRARY_PATH": "/nonexistent"})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("unavailable: gdn: no", out.stdout)
        self.assertIn("still running", out.stdout)

    @unittest.skipUnless(os.path.exists(os.path.join(os.environ.get("GDN_TEST_LIBCUDA_DIR", "/nonexistent"), "libcuda.so.1"))
                         and os.environ.get("GDN_LIBRARY"),
                         "set GDN_TEST_LIBCUDA_DIR (a folder with a driver's libcuda.so.1) and GDN_LIBRARY (libgdn built with CUDA)")
    def test_driver_without_gpu(self):
        # A real driver library but no GPU: cuInit fails and libgdn, which
        # would exit the process on load, is never loaded.
        out = self.run_call({"LD_LIBRARY_PATH": os.environ["GDN_TEST_LIBCUDA_DIR"]})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("unavailable: gdn: no usable GPU: cuInit(0) returned", out.stdout)
        self.assertIn("still running", out.stdout)

    def test_valid_call_reaches_the_driver(self):
        with self.assertRaises(gdn.GdnUnavailable):
            gdn.chunk_gated_delta_rule(**full_inputs(), use_qk_l2norm_in_kernel=True)


class LibraryNotFoundTest(unittest.TestCase):
    def test_says_where_it_looked(self):
        old = os.environ.get("GDN_LIBRARY")
        os.environ["GDN_LIBRARY"] = "/nonexistent/libgdn.so"
        try:
            with self.assertRaises(gdn.GdnUnavailable) as cm:
                _lib.load(check_driver=False)
        finally:
            if old is None:
                del os.environ["GDN_LIBRARY"]
            else:
                os.environ["GDN_LIBRARY"] = old
        self.assertIn("/nonexistent/libgdn.so", str(cm.exception))
        self.assertIn("make python", str(cm.exception))

    def test_default_candidate_is_beside_the_package(self):
        old = os.environ.pop("GDN_LIBRARY", None)
        try:
            self.assertEqual(_lib.candidates(), [os.path.join(os.path.dirname(gdn.__file__), "libgdn.so")])
        finally:
            if old is not None:
                os.environ["GDN_LIBRARY"] = old


class ArgumentTest(unittest.TestCase):
    """Each bad argument raises ArgumentError naming it, before any call
    (no driver is touched: these pass identically with or without a GPU)."""

    def check(self, arg, fn=gdn.chunk_gated_delta_rule, **kw):
        call = {**full_inputs(), **kw}
        with self.assertRaises(gdn.ArgumentError) as cm:
            fn(**call)
        self.assertEqual(cm.exception.arg, arg, str(cm.exception))
        self.assertTrue(str(cm.exception).startswith(f"gdn: {arg}: "), str(cm.exception))
        return str(cm.exception)

    def test_not_a_cuda_tensor(self):
        self.assertIn("list", self.check("q", q=[1, 2, 3]))

    def test_dtypes(self):
        self.assertIn("<f8", self.check("q", q=FakeCuda((1, 64, 2, 128), "fp64")))
        self.check("q", q=FakeCuda((1, 64, 2, 128), "fp32"))
        self.check("k", k=FakeCuda((1, 64, 2, 128), "fp32"))
        self.check("g", g=FakeCuda((1, 64, 4), "fp16"))
        self.check("initial_state", initial_state=FakeCuda((1, 4, 128, 128), "fp16"))

    def test_shapes(self):
        self.check("q", q=FakeCuda((1, 64, 2, 64)))
        self.check("k", k=FakeCuda((1, 64, 3, 128)))
        self.check("v", v=FakeCuda((1, 64, 3, 128)))  # 3 value heads, 2 q heads
        self.check("g", g=FakeCuda((1, 64, 2), "fp32"))
        self.check("beta", beta=FakeCuda((1, 63, 4), "fp32"))
        self.check("initial_state", initial_state=FakeCuda((2, 4, 128, 128), "fp32"))
        self.check("out", out=FakeCuda((1, 64, 2, 128)))

    def test_not_contiguous(self):
        strides = (64 * 2 * 128 * 2, 2 * 128 * 2, 2, 2 * 2)  # the last two axes swapped
        self.assertIn("contiguous", self.check("q", q=FakeCuda((1, 64, 2, 128), strides=strides)))

    def test_contiguous_strides_accepted(self):
        # Explicit C strides are as good as none: the call gets past q.
        strides = (64 * 2 * 128 * 2, 2 * 128 * 2, 128 * 2, 2)
        self.check("k", q=FakeCuda((1, 64, 2, 128), strides=strides), k=FakeCuda((1, 64, 2, 64)))

    def test_gate_parameters(self):
        self.check("A_log", use_gate_in_kernel=True)
        # No dt_bias is a zero bias, which only torch can make: an A_log that
        # is not a torch tensor needs one given.
        self.assertIn("zero bias", self.check("dt_bias", use_gate_in_kernel=True, A_log=FakeCuda((4,), "fp32")))
        self.check("A_log", A_log=FakeCuda((4,), "fp32"), dt_bias=FakeCuda((4,), "fp32"))
        self.check("A_log", use_gate_in_kernel=True, A_log=FakeCuda((2,), "fp32"), dt_bias=FakeCuda((4,), "fp32"))

    def test_options(self):
        self.check("allow_neg_eigval", allow_neg_eigval=True)
        self.check("scale", scale=0.0)
        self.check("scale", scale=float("nan"))
        self.check("final_state_out", final_state_out=FakeCuda((1, 4, 128, 128), "fp32"))

    def test_cu_seqlens(self):
        B2 = full_inputs(B=2, T=32)
        with self.assertRaises(gdn.ArgumentError) as cm:
            gdn.chunk_gated_delta_rule(**B2, cu_seqlens=FakeCuda((3,), "int64"), cu_seqlens_cpu=[0, 16, 64])
        self.assertEqual(cm.exception.arg, "cu_seqlens")
        self.check("cu_seqlens", cu_seqlens=FakeCuda((3,), "fp32"))
        self.check("cu_seqlens_cpu", cu_seqlens=FakeCuda((3,), "int64"))  # not torch: no read-back
        self.check("cu_seqlens_cpu", cu_seqlens=FakeCuda((3,), "int64"), cu_seqlens_cpu=[0, 64])
        self.check("initial_state", cu_seqlens=FakeCuda((3,), "int32"), cu_seqlens_cpu=[0, 5, 64],
                   initial_state=FakeCuda((1, 4, 128, 128), "fp32"))

    def test_fla_signature(self):
        # A call written for FLA's chunk_gated_delta_rule (0.5.1) binds the
        # same way here: its positional parameters in its order, and the
        # keywords it reads from **kwargs.
        import inspect
        params = inspect.signature(gdn.chunk_gated_delta_rule).parameters
        positional = [n for n, p in params.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
        self.assertEqual(positional, ["q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
                                      "use_qk_l2norm_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                                      "state_v_first", "cu_seqlens", "cu_seqlens_cpu", "cp_context"])
        for name in ("use_gate_in_kernel", "A_log", "dt_bias"):
            self.assertEqual(params[name].kind, inspect.Parameter.KEYWORD_ONLY)
        self.check("cp_context", cp_context=object())

    def test_outputs_need_torch_or_buffers(self):
        call = full_inputs()
        del call["out"]
        with self.assertRaises(gdn.ArgumentError) as cm:
            gdn.chunk_gated_delta_rule(**call)
        self.assertEqual(cm.exception.arg, "out")

    def test_decode(self):
        base = dict(state_pool=FakeCuda((8, 4, 128, 128), "fp32"), slots=FakeCuda((1,), "int32"), slots_cpu=[0])
        small = full_inputs(T=1)

        def bad(arg, **kw):
            call = {**small, **base, **kw}
            with self.assertRaises(gdn.ArgumentError) as cm:
                gdn.decode(**call)
            self.assertEqual(cm.exception.arg, arg, str(cm.exception))

        bad("state_pool", state_pool=FakeCuda((8, 4, 128, 128), "fp16"))
        bad("slots", slots=FakeCuda((2,), "int32"))
        bad("slots", slots=FakeCuda((1,), "int64"))
        bad("slots_cpu", slots_cpu=[0, 1])
        bad("token_states_out", token_states_out=FakeCuda((1, 4, 128, 128), "fp32"))


if __name__ == "__main__":
    unittest.main()
