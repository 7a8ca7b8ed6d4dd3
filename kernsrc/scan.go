package kernsrc

import "fmt"

// ScanKernel is the entry point of gdn_scan.cu: the scan of a
// sequence-parallel plan, which joins the transfer pass's per-segment end
// states and transfer matrices into every segment's true start state.
const ScanKernel = "gdn_scan_states"

// The scan's launch geometry: a CTA of ScanThreads threads owns
// ScanColumns value columns of one head of one sequence, so the grid is
// (128 / ScanColumns, Hv, N).
const (
	ScanThreads = 256
	ScanColumns = 8
)

// ScanSharedBytes is the scan's dynamic shared memory: two buffers of a
// transfer matrix (128 x 128 fp32), which each warp fills with a bulk copy
// of its part a step ahead (gdn_scan.cu). Its split copy of the state, two
// buffers of 8 columns, is static.
const ScanSharedBytes = 2 * 128 * 128 * 4

// ScanVariant is the scan kernel (one variant: it reads only fp32 states).
func ScanVariant() Variant {
	return Variant{Name: "gdn_scan_states", File: "gdn_scan.cu", Kernel: ScanKernel,
		Defines: []string{fmt.Sprintf("GDN_SCAN_SMEM_BYTES=%d", ScanSharedBytes), fmt.Sprintf("GDN_SCAN_THREADS=%d", ScanThreads)}}
}
