"""libgdn's ABI against the package's ctypes mirrors, on the CPU: the field
offsets against gdn.h as a C compiler lays it out, and a libgdn built
without CUDA (GDN_TEST_NOCUDA_LIBRARY; `make python-test` builds one) for the
version, the struct sizes, the status codes and the messages.
"""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gdn  # noqa: E402
from gdn import _abi, _lib  # noqa: E402

HEADER_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "cmd", "libgdn")
C_NAMES = {
    _abi.Tensor: "gdn_tensor", _abi.Options: "gdn_options", _abi.Pool: "gdn_pool", _abi.Seqs: "gdn_seqs",
    _abi.CoreArgs: "gdn_core_args", _abi.FullArgs: "gdn_full_args", _abi.DecodeArgs: "gdn_decode_args",
}


@unittest.skipUnless(shutil.which("cc") and os.path.exists(os.path.join(HEADER_DIR, "gdn.h")),
                     "needs a C compiler and gdn.h (a clone of the repository)")
class HeaderLayoutTest(unittest.TestCase):
    def test_offsets_and_sizes(self):
        # A C program prints sizeof and every field's offsetof, as the
        # compiler lays gdn.h out; the mirrors must agree field for field.
        lines, want = [], []
        for struct, name in C_NAMES.items():
            lines.append(f'printf("%zu\\n", sizeof({name}));')
            want.append(ctypes.sizeof(struct))
            for field, _ in struct._fields_:
                lines.append(f'printf("%zu\\n", offsetof({name}, {field}));')
                want.append(getattr(struct, field).offset)
        src = ("#include <stddef.h>\n#include <stdio.h>\n#include \"gdn.h\"\n"
               "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "layout.c"), "w") as f:
                f.write(src)
            exe = os.path.join(d, "layout")
            subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", HEADER_DIR, "-o", exe,
                            os.path.join(d, "layout.c")], check=True)
            got = [int(x) for x in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()]
        self.assertEqual(got, want)


@unittest.skipUnless(os.environ.get("GDN_TEST_NOCUDA_LIBRARY"),
                     "set GDN_TEST_NOCUDA_LIBRARY to a libgdn built without -tags cuda (make python-test does)")
class NoCUDALibraryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # load checks the ABI version and every struct's size against _abi.
        cls.lib = _lib.load(os.environ["GDN_TEST_NOCUDA_LIBRARY"], check_driver=False)

    def test_version_and_sizes(self):
        self.assertEqual(self.lib.gdn_abi_version(), _abi.ABI_VERSION)
        for which, struct in _abi.STRUCTS.items():
            self.assertEqual(self.lib.gdn_struct_size(which), ctypes.sizeof(struct), struct.__name__)
        self.assertEqual(self.lib.gdn_struct_size(99), 0)

    def test_open_without_cuda(self):
        out = ctypes.c_uint64(7)
        st = self.lib.gdn_open(ctypes.byref(_abi.Options()), ctypes.byref(out))
        self.assertEqual((st, out.value), (_abi.ERR_NO_CUDA, 0))
        with self.assertRaises(gdn.GdnUnavailable) as cm:
            _lib.raise_for(self.lib, 0, st)
        self.assertIn("CUDA", str(cm.exception))
        self.assertEqual(cm.exception.status, _abi.ERR_NO_CUDA)

    def test_unknown_handle(self):
        for fn, args in ((self.lib.gdn_forward, _abi.CoreArgs()), (self.lib.gdn_forward_full, _abi.FullArgs()),
                         (self.lib.gdn_decode, _abi.DecodeArgs()), (self.lib.gdn_forward_mixed, _abi.FullArgs())):
            st = fn(12345, ctypes.byref(args), 0)
            self.assertEqual(st, _abi.ERR_CLOSED)
        self.assertEqual(self.lib.gdn_close(12345), _abi.ERR_CLOSED)
        with self.assertRaises(gdn.GdnError) as cm:
            _lib.raise_for(self.lib, 12345, _abi.ERR_CLOSED)
        self.assertIn("runtime handle 12345 is closed or was never opened", str(cm.exception))

    def test_last_error_is_cut_to_the_buffer(self):
        self.lib.gdn_close(777)
        whole = _lib.last_error(self.lib, 0)
        buf = ctypes.create_string_buffer(8)
        n = self.lib.gdn_last_error(0, buf, len(buf))
        self.assertEqual(n, len(whole))
        self.assertEqual(buf.value.decode(), whole[:7])

    def test_build_info(self):
        # The line names the library, the Go version, and (built without the
        # cuda tag) says it has no CUDA; cut to a short buffer as messages are.
        line = _lib.build_info(self.lib)
        self.assertTrue(line.startswith("libgdn "), line)
        self.assertIn(" go1.", line)
        self.assertIn("no CUDA", line)
        self.assertTrue(line.endswith(" at " + os.environ["GDN_TEST_NOCUDA_LIBRARY"]), line)
        buf = ctypes.create_string_buffer(8)
        n = self.lib.gdn_build_info(buf, len(buf))
        self.assertEqual(buf.value.decode(), "libgdn ")
        self.assertGreater(n, 7)
        self.assertEqual(n, len(line) - len(" at " + os.environ["GDN_TEST_NOCUDA_LIBRARY"]))


if __name__ == "__main__":
    unittest.main()
