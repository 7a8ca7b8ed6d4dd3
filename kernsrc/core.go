package kernsrc

import "fmt"

// CoreKernel is the entry point of the GDN core forward (gdn_core.cu).
const CoreKernel = "gdn_core_fwd"

// CoreThreads is the block size of the core kernel for a value-tile width:
// a chain group of four warps and a prep group of eight (BV 32) or four
// (BV 64) warps that builds chunk c+1 while the chain runs chunk c.
func CoreThreads(tileWidth int) int {
	if tileWidth == 32 {
		return 32 * (4 + 8)
	}
	return 32 * (4 + 4)
}

// CoreTileWidths are the value-tile widths the core kernel is built for. A
// narrower tile gives more CTAs (one per sequence, value head and tile) at the
// price of repeating Q K^T per tile.
var CoreTileWidths = []int{32, 64}

// CoreDtype names the 16-bit input dtype a core variant is built for.
type CoreDtype string

// The input dtypes of q, k, v and o.
const (
	CoreBF16 CoreDtype = "bf16"
	CoreFP16 CoreDtype = "fp16"
)

// CoreVariant returns the core-forward variant for an input dtype and a
// value-tile width.
func CoreVariant(dt CoreDtype, tileWidth int) (Variant, error) {
	fp16 := 0
	switch dt {
	case CoreBF16:
	case CoreFP16:
		fp16 = 1
	default:
		return Variant{}, fmt.Errorf("kernsrc: core dtype %q: want bf16 or fp16", dt)
	}
	if tileWidth != 32 && tileWidth != 64 {
		return Variant{}, fmt.Errorf("kernsrc: core value-tile width %d: want 32 or 64", tileWidth)
	}
	return Variant{
		Name:   fmt.Sprintf("gdn_core_%s_bv%d", dt, tileWidth),
		File:   "gdn_core.cu",
		Kernel: CoreKernel,
		Defines: []string{fmt.Sprintf("GDN_FP16=%d", fp16), fmt.Sprintf("GDN_BV=%d", tileWidth),
			fmt.Sprintf("GDN_SMEM_BYTES=%d", CoreSharedBytes(tileWidth))},
	}, nil
}

// CoreSharedBytes is the dynamic shared memory the core kernel needs for a
// value-tile width. It mirrors struct Smem in gdn_core.cu (16-bit tiles padded
// by 8 elements): a ring of slots (three for BV 32, two for BV 64), each with
// q and k (64 x 136), the value tile (64 x (bv+8)), A and P (64 x 72) and
// four fp32 vectors of 64; then the fp16 state (128 x (bv+8)), W, Vn and the
// decayed Vn (64 x (bv+8)). The kernel checks the sum with a static_assert
// (define GDN_SMEM_BYTES).
func CoreSharedBytes(tileWidth int) int {
	const c, ldD, ldC = 64, 136, 72
	ldV := tileWidth + 8
	slots := 2
	if tileWidth == 32 {
		slots = 3
	}
	slot := 2*(2*c*ldD+c*ldV+2*c*ldC) + 4*c*4
	return slots*slot + 2*(128*ldV+3*c*ldV)
}

// CoreVariants lists every core-forward variant (each dtype and tile width).
func CoreVariants() []Variant {
	var out []Variant
	for _, dt := range []CoreDtype{CoreBF16, CoreFP16} {
		for _, bv := range CoreTileWidths {
			v, _ := CoreVariant(dt, bv)
			out = append(out, v)
		}
	}
	return out
}
