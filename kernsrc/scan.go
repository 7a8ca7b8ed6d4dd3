package kernsrc

import (
	"fmt"
	"slices"
)

// ScanKernel is the entry point of gdn_scan.cu: the scan of a
// sequence-parallel plan, which joins the transfer pass's per-segment end
// states and transfer matrices into every segment's true start state.
const ScanKernel = "gdn_scan_states"

// ScanThreads is the scan's block size. A CTA owns `columns` value columns
// (ScanVariant's argument) of one head of one sequence, so the grid is
// (128 / columns, Hv, N).
const ScanThreads = 256

// ScanColumnChoices lists the value columns a scan CTA may own, one variant
// each (a new slice each call). Every width gives the same states to the
// bit; a wider CTA reads each transfer matrix for more columns at once but
// takes longer a step (gdn_scan.cu), and the planner picks the width by the
// waves of its grid (split.go).
func ScanColumnChoices() []int { return []int{8, 16, 32} }

// ScanSharedBytes is the scan's dynamic shared memory for CTAs of columns
// value columns: two buffers of a transfer matrix (128 x 128 fp32), which
// each warp fills with a bulk copy of its part a step ahead (gdn_scan.cu),
// then two buffers of the state's split copy (columns rows of 132 (hi, lo)
// float pairs: 128 and a pad that spreads the banks).
func ScanSharedBytes(columns int) int { return 2*128*128*4 + 2*columns*132*8 }

// ScanParams are the scan kernel's parameters, in its order: the device
// addresses of the transfer pass's end states and transfer matrices (bm),
// of the start states h0 (0: zero), of the start states the scan writes
// (starts) and of each sequence's first transfer segment (first, int32);
// the transfer segments P, the value heads Hv, the sequences N and the
// flags of h0's format (ScanFlag*); then the pool's slot table and its
// slots S (ScanFlagSlots). Pack lays them out as the kernel's parameter
// space, which gdn_scan.cu checks against these fields.
type ScanParams struct {
	BM, H0, Starts, First uintptr
	P, Hv, N, Flags       int32
	Slots                 uintptr
	PoolSlots             int32
}

// The flags of the scan's h0 (0: fp32 [K,V], one state per sequence).
const (
	ScanFlagVK    = 1 // h0 is [V,K]
	ScanFlagBF16  = 2 // h0 is a bf16 pool
	ScanFlagSlots = 4 // h0 is a pool: sequence n starts from slot Slots[n] (negative: zero)
)

// ScanParamsBytes is the size of the scan kernel's parameter space.
const ScanParamsBytes = 4*8 + 4*4 + 8 + 4

var scanFields, scanBytes = paramLayout(8, 8, 8, 8, 4, 4, 4, 4, 8, 4)

// ScanParamFields lists the kernel's parameters in a packed block, in
// order (a new slice each call).
func ScanParamFields() []ParamField { return append([]ParamField(nil), scanFields...) }

// Pack writes the parameters into b.
func (p *ScanParams) Pack(b *[ScanParamsBytes]byte) {
	packFields(b[:], scanFields, []uint64{uint64(p.BM), uint64(p.H0), uint64(p.Starts), uint64(p.First),
		uint64(uint32(p.P)), uint64(uint32(p.Hv)), uint64(uint32(p.N)), uint64(uint32(p.Flags)),
		uint64(p.Slots), uint64(uint32(p.PoolSlots))})
}

// ScanVariant is the scan kernel for CTAs of columns value columns (one of
// ScanColumnChoices); it reads only fp32 states, whatever the input dtype,
// and h0 in fp32 [K,V] (its flags must be 0).
func ScanVariant(columns int) (Variant, error) { return scanVariant(columns, false) }

// ScanStatesVariant is ScanVariant that also reads h0 in the format its
// flags give (ScanFlag*: a pool through its slot table, [V,K], bf16): the
// scan of a split call whose start states are the caller's in one of the
// serving layer's formats.
func ScanStatesVariant(columns int) (Variant, error) { return scanVariant(columns, true) }

func scanVariant(columns int, states bool) (Variant, error) {
	if !slices.Contains(ScanColumnChoices(), columns) {
		return Variant{}, fmt.Errorf("kernsrc: scan CTAs of %d value columns; want one of %v", columns, ScanColumnChoices())
	}
	v := Variant{Name: fmt.Sprintf("%s_c%d", ScanKernel, columns), File: "gdn_scan.cu", Kernel: ScanKernel,
		Defines: []string{
			fmt.Sprintf("GDN_SCAN_COLUMNS=%d", columns),
			fmt.Sprintf("GDN_SCAN_SMEM_BYTES=%d", ScanSharedBytes(columns)),
			fmt.Sprintf("GDN_SCAN_THREADS=%d", ScanThreads),
			fmt.Sprintf("GDN_SCAN_PARAMS_BYTES=%d", ScanParamsBytes),
			fmt.Sprintf("GDN_SCAN_OFF_P=%d", scanFields[4].Offset),
			fmt.Sprintf("GDN_SCAN_FLAG_VK=%d", ScanFlagVK),
			fmt.Sprintf("GDN_SCAN_FLAG_BF16=%d", ScanFlagBF16),
			fmt.Sprintf("GDN_SCAN_FLAG_SLOTS=%d", ScanFlagSlots)}}
	if states {
		v.Name += "_states"
		v.Defines = append(v.Defines, "GDN_SCAN_STATES=1")
	}
	return v, nil
}

// ScanVariants lists every scan variant, narrowest first.
func ScanVariants() []Variant {
	var out []Variant
	for _, c := range ScanColumnChoices() {
		v, _ := ScanVariant(c)
		out = append(out, v)
	}
	return out
}

// ScanStatesVariants lists every scan states variant, narrowest first.
func ScanStatesVariants() []Variant {
	var out []Variant
	for _, c := range ScanColumnChoices() {
		v, _ := ScanStatesVariant(c)
		out = append(out, v)
	}
	return out
}
