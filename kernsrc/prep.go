package kernsrc

import (
	"fmt"
	"slices"
)

// The kernel of gdn_prep.cu: the steps of the full forward before the core
// forward (per chunk and value head: the L2 normalisation of q and k when
// asked, the gates, their chunk-local sum and A2).
const PrepChunkKernel = "gdn_prep_chunk"

// PrepThreads is the prep kernel's block size. Each 128-thread block takes
// one chunk and `heads` value heads of one key head (PrepVariant's
// argument, one of PrepHeads()): grid (chunks, Hv / heads).
const PrepThreads = 128

// PrepHeads lists the value heads a prep block may take, the most first
// (a new slice each call). The block loads and normalises the chunk's k
// rows and forms K K^T once for all of them, and the count must divide
// Hv / Hq. (Two heads a block gain nothing over one.)
func PrepHeads() []int { return []int{4, 1} }

// PrepChunkSharedBytes is the prep kernel's dynamic shared memory for blocks
// of heads value heads, in two phases: the chunk's k rows (two swizzled
// wgmma tiles of 64 rows x 128 bytes), then the 64 x 64 fp16 tile A2 is built in, the fp32
// scratch of its diagonal blocks (4 x 16 x 20 floats) and, with several
// heads, K K^T kept in its accumulator layout for each head (20 m16n8
// tiles of 32 lanes x 16 bytes); then g and beta of every head, and the
// warp totals of their sums; and 1024 bytes of slack that align the
// kernel's base for the tiles' swizzle.
func PrepChunkSharedBytes(heads int) int {
	phase2 := 64*128 + 4*16*20*4
	if heads > 1 {
		phase2 += 20 * 32 * 16
	}
	return max(2*64*128, phase2) + 2*64*4*heads + 16 + 1024
}

// Flags of the chunk kernel.
const (
	PrepFlagGateInKernel = 1 // g holds the gate's raw input a
	PrepFlagBetaFP32     = 2 // beta is fp32 (else the dtype of q)
	PrepFlagL2Norm       = 4 // q and k are L2-normalised (into the qn and kn scratch, in fp16)
	// With PrepFlagL2Norm: the core kernel normalises q and k itself
	// (CoreBF16L2Norm), so the kernel neither reads q nor writes the copies;
	// k is still normalised for its own K K^T.
	PrepFlagNormInCore = 8
	PrepFlagBetaLogits = 16 // beta holds logits b: beta = sigmoid(b)
	PrepFlagNegEigval  = 32 // with PrepFlagBetaLogits: beta = 2 sigmoid(b)
)

// PrepParams are the prep kernel's parameters, in its order: the device
// addresses of q and k, of their normalised copies qn and kn (written with
// PrepFlagL2Norm), of beta and the gate input g, of A_log and dt_bias
// (PrepFlagGateInKernel), of the outputs gcum (chunk-local cumulative
// log-gates) and A2, and of the chunk table (int32 begin, end pairs); then
// the head counts and the flags. Pack lays them out as the kernel's
// parameter space, which gdn_prep.cu checks against these fields.
type PrepParams struct {
	Q, K, QN, KN, Beta, G, ALog, DtBias, GCum, A2, Chunks uintptr
	Hq, Hv, Flags                                         int32
}

// PrepParamsBytes is the size of the prep kernel's parameter space.
const PrepParamsBytes = 11*8 + 3*4

var prepFields, prepBytes = paramLayout(8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4, 4)

// PrepParamFields lists the kernel's parameters in a packed block, in
// order (a new slice each call): what a launch hands the driver one by one.
func PrepParamFields() []ParamField { return append([]ParamField(nil), prepFields...) }

// Pack writes the parameters into b.
func (p *PrepParams) Pack(b *[PrepParamsBytes]byte) {
	packFields(b[:], prepFields, []uint64{uint64(p.Q), uint64(p.K), uint64(p.QN), uint64(p.KN), uint64(p.Beta), uint64(p.G),
		uint64(p.ALog), uint64(p.DtBias), uint64(p.GCum), uint64(p.A2), uint64(p.Chunks),
		uint64(uint32(p.Hq)), uint64(uint32(p.Hv)), uint64(uint32(p.Flags))})
}

// PrepVariant returns the variant of the prep kernel (PrepChunkKernel) for
// an input dtype and blocks of heads value heads (one of PrepHeads).
func PrepVariant(kernel string, dt CoreDtype, heads int) (Variant, error) {
	switch kernel {
	case PrepChunkKernel:
	default:
		return Variant{}, fmt.Errorf("kernsrc: no prep kernel %q", kernel)
	}
	if !slices.Contains(PrepHeads(), heads) {
		return Variant{}, fmt.Errorf("kernsrc: prep blocks of %d value heads; want one of %v", heads, PrepHeads())
	}
	fp16, err := fp16Define(dt, "prep")
	if err != nil {
		return Variant{}, err
	}
	name := kernel + "_" + string(dt)
	if heads > 1 {
		name += fmt.Sprintf("_h%d", heads)
	}
	return Variant{Name: name, File: "gdn_prep.cu", Kernel: kernel, Defines: []string{
		fmt.Sprintf("GDN_FP16=%d", fp16),
		fmt.Sprintf("GDN_PREP_HEADS=%d", heads),
		fmt.Sprintf("GDN_PREP_CHUNK_SMEM=%d", PrepChunkSharedBytes(heads)),
		fmt.Sprintf("GDN_PREP_FLAG_GATE=%d", PrepFlagGateInKernel),
		fmt.Sprintf("GDN_PREP_FLAG_BETA_FP32=%d", PrepFlagBetaFP32),
		fmt.Sprintf("GDN_PREP_FLAG_L2NORM=%d", PrepFlagL2Norm),
		fmt.Sprintf("GDN_PREP_FLAG_NORM_IN_CORE=%d", PrepFlagNormInCore),
		fmt.Sprintf("GDN_PREP_FLAG_BETA_LOGITS=%d", PrepFlagBetaLogits),
		fmt.Sprintf("GDN_PREP_FLAG_NEG_EIGVAL=%d", PrepFlagNegEigval),
		fmt.Sprintf("GDN_PREP_PARAMS_BYTES=%d", PrepParamsBytes),
		fmt.Sprintf("GDN_PREP_OFF_HQ=%d", prepFields[11].Offset)}}, nil
}

// PrepVariants lists every prep variant.
func PrepVariants() []Variant {
	var out []Variant
	for _, dt := range []CoreDtype{CoreBF16, CoreFP16} {
		for _, h := range PrepHeads() {
			v, _ := PrepVariant(PrepChunkKernel, dt, h)
			out = append(out, v)
		}
	}
	return out
}
