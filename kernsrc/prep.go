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
// Hv / Hq. (Two heads a block were measured no faster than one:
// docs/PERF.md v16.)
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
)

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
		fmt.Sprintf("GDN_PREP_FLAG_NORM_IN_CORE=%d", PrepFlagNormInCore)}}, nil
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
