package kernsrc

import "fmt"

// The kernels of gdn_prep.cu: the steps of the full forward before the core
// forward (gates and their chunk-local sum, L2 normalisation of q and k, A).
const (
	PrepGatesKernel  = "gdn_prep_gates"
	PrepL2NormKernel = "gdn_prep_l2norm"
	PrepSolveKernel  = "gdn_prep_solve"
)

// Launch geometry: gates and l2norm run 128-thread blocks (a thread per
// (chunk, head), a warp per 128-vector); solve one 256-thread block per
// (chunk, value head) with PrepSolveSharedBytes of dynamic shared memory
// (k rows, L, its inverse, g and beta).
const (
	PrepThreads          = 128
	PrepSolveThreads     = 256
	PrepSolveSharedBytes = 64*136*2 + 2*64*65*4 + 2*64*4
)

// Flags of the gates and solve kernels.
const (
	PrepFlagGateInKernel = 1 // g holds the gate's raw input a
	PrepFlagBetaFP32     = 2 // beta is fp32 (else the dtype of q)
)

// PrepVariant returns the variant of one prep kernel (PrepGatesKernel,
// PrepL2NormKernel or PrepSolveKernel) for an input dtype. The gates kernel
// reads only fp32 and ignores dt.
func PrepVariant(kernel string, dt CoreDtype) (Variant, error) {
	switch kernel {
	case PrepGatesKernel, PrepL2NormKernel, PrepSolveKernel:
	default:
		return Variant{}, fmt.Errorf("kernsrc: no prep kernel %q", kernel)
	}
	fp16, err := fp16Define(dt, "prep")
	if err != nil {
		return Variant{}, err
	}
	name := kernel + "_" + string(dt)
	if kernel == PrepGatesKernel {
		name, fp16 = kernel, 0
	}
	return Variant{Name: name, File: "gdn_prep.cu", Kernel: kernel, Defines: []string{
		fmt.Sprintf("GDN_FP16=%d", fp16),
		fmt.Sprintf("GDN_PREP_FLAG_GATE=%d", PrepFlagGateInKernel),
		fmt.Sprintf("GDN_PREP_FLAG_BETA_FP32=%d", PrepFlagBetaFP32)}}, nil
}

// PrepVariants lists every prep variant.
func PrepVariants() []Variant {
	g, _ := PrepVariant(PrepGatesKernel, CoreBF16)
	out := []Variant{g}
	for _, k := range []string{PrepL2NormKernel, PrepSolveKernel} {
		for _, dt := range []CoreDtype{CoreBF16, CoreFP16} {
			v, _ := PrepVariant(k, dt)
			out = append(out, v)
		}
	}
	return out
}
