package kernsrc

// TestVariants are the small kernels that prove the JIT machinery (compile,
// load, launch with large dynamic shared memory, graph capture and replay)
// independently of the GDN kernels.
func TestVariants() []Variant {
	return []Variant{
		{Name: "test_axpy", File: "test_kernels.cu", Kernel: "gdn_test_axpy"},
		{Name: "test_smem_reverse", File: "test_kernels.cu", Kernel: "gdn_test_smem_reverse"},
	}
}
