package kernsrc

import "fmt"

// The kernels of gdn_prep.cu: the steps of the full forward before the core
// forward (L2 normalisation of q and k; per chunk and value head the gates,
// their chunk-local sum and A).
const (
	PrepL2NormKernel = "gdn_prep_l2norm"
	PrepChunkKernel  = "gdn_prep_chunk"
)

// Launch geometry: both run 128-thread blocks; l2norm PrepL2NormRowsPerBlock
// 128-vectors a block (a half-warp per vector),
// chunk one block per (chunk, value head) with PrepChunkSharedBytes of
// dynamic shared memory (one 64 x 64 fp32 buffer for the k rows, then L,
// then its inverse; a 32 x 32 fp32 block for the inner products of the
// inverse; g, beta and a warp total).
const (
	PrepThreads            = 128
	PrepL2NormRowsPerBlock = 32
	PrepChunkSharedBytes   = 64*68*4 + 32*36*4 + 2*64*4 + 16
)

// Flags of the chunk kernel.
const (
	PrepFlagGateInKernel = 1 // g holds the gate's raw input a
	PrepFlagBetaFP32     = 2 // beta is fp32 (else the dtype of q)
)

// PrepVariant returns the variant of one prep kernel (PrepL2NormKernel or
// PrepChunkKernel) for an input dtype.
func PrepVariant(kernel string, dt CoreDtype) (Variant, error) {
	switch kernel {
	case PrepL2NormKernel, PrepChunkKernel:
	default:
		return Variant{}, fmt.Errorf("kernsrc: no prep kernel %q", kernel)
	}
	fp16, err := fp16Define(dt, "prep")
	if err != nil {
		return Variant{}, err
	}
	return Variant{Name: kernel + "_" + string(dt), File: "gdn_prep.cu", Kernel: kernel, Defines: []string{
		fmt.Sprintf("GDN_FP16=%d", fp16),
		fmt.Sprintf("GDN_PREP_CHUNK_SMEM=%d", PrepChunkSharedBytes),
		fmt.Sprintf("GDN_PREP_L2_ROWS=%d", PrepL2NormRowsPerBlock/8),
		fmt.Sprintf("GDN_PREP_FLAG_GATE=%d", PrepFlagGateInKernel),
		fmt.Sprintf("GDN_PREP_FLAG_BETA_FP32=%d", PrepFlagBetaFP32)}}, nil
}

// PrepVariants lists every prep variant.
func PrepVariants() []Variant {
	var out []Variant
	for _, k := range []string{PrepL2NormKernel, PrepChunkKernel} {
		for _, dt := range []CoreDtype{CoreBF16, CoreFP16} {
			v, _ := PrepVariant(k, dt)
			out = append(out, v)
		}
	}
	return out
}
