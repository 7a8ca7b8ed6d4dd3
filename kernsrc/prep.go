package kernsrc

import "fmt"

// The kernel of gdn_prep.cu: the steps of the full forward before the core
// forward (per chunk and value head: the L2 normalisation of q and k when
// asked, the gates, their chunk-local sum and A2).
const PrepChunkKernel = "gdn_prep_chunk"

// Launch geometry: 128-thread blocks, one per (chunk, value head), with
// PrepChunkSharedBytes of dynamic shared memory (one 64 x 64 fp32 buffer
// for the k rows, then L, then its inverse; a 32 x 32 fp32 block for the
// inner products of the inverse; g, beta and a warp total).
const (
	PrepThreads          = 128
	PrepChunkSharedBytes = 64*68*4 + 32*36*4 + 2*64*4 + 16
)

// Flags of the chunk kernel.
const (
	PrepFlagGateInKernel = 1 // g holds the gate's raw input a
	PrepFlagBetaFP32     = 2 // beta is fp32 (else the dtype of q)
	PrepFlagL2Norm       = 4 // q and k are L2-normalised (into the qn and kn scratch)
)

// PrepVariant returns the variant of the prep kernel (PrepChunkKernel) for
// an input dtype.
func PrepVariant(kernel string, dt CoreDtype) (Variant, error) {
	switch kernel {
	case PrepChunkKernel:
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
		fmt.Sprintf("GDN_PREP_FLAG_GATE=%d", PrepFlagGateInKernel),
		fmt.Sprintf("GDN_PREP_FLAG_BETA_FP32=%d", PrepFlagBetaFP32),
		fmt.Sprintf("GDN_PREP_FLAG_L2NORM=%d", PrepFlagL2Norm)}}, nil
}

// PrepVariants lists every prep variant.
func PrepVariants() []Variant {
	var out []Variant
	for _, dt := range []CoreDtype{CoreBF16, CoreFP16} {
		v, _ := PrepVariant(PrepChunkKernel, dt)
		out = append(out, v)
	}
	return out
}
