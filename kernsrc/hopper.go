package kernsrc

import (
	"encoding/binary"
	"fmt"
	"math"
)

// CoreDtype names the 16-bit dtypes a core variant is built for.
type CoreDtype string

// The dtypes of q, k, v and o.
const (
	CoreBF16 CoreDtype = "bf16"
	CoreFP16 CoreDtype = "fp16"
	// CoreBF16FP16QK: v and o bf16, q and k fp16: the full forward's core
	// on bf16 inputs with L2Norm, whose normalised copies of q and k the
	// preparation writes in fp16 (3 more bits than bf16 for entries of at
	// most 1). A core variant only: the preparation is built per input
	// dtype.
	CoreBF16FP16QK CoreDtype = "bf16_fp16qk"
	// CoreBF16L2Norm: q, k, v and o bf16, q and k L2-normalised by the core
	// kernel itself (PrepNorm: its converter warpgroup) to the bit as the
	// preparation's fp16 copies would be: the full forward's L2Norm on an
	// unsplit BV 128 plan, whose preparation then neither reads q nor writes
	// the copies. BV 128 core forward only (HopperConverters).
	CoreBF16L2Norm CoreDtype = "bf16_l2norm"
	// CoreBF16Fused: CoreBF16L2Norm with the full forward's whole
	// preparation inside (PrepFused): g is the raw log-gate (or the gate's
	// raw input, HopperFlagGateInKernel), summed in each chunk by the kernel,
	// and A2 is built by its aux group from the normalised K; no A is read
	// and no preparation kernel runs before it. BV 128 core forward only.
	CoreBF16Fused CoreDtype = "bf16_fused"
	// CoreBF16FusedNoNorm: CoreBF16Fused without the L2 norm, for a full
	// forward whose q and k are used as given (no L2Norm): its converter
	// forms P from Q and K as loaded, beside the aux group's K K^T (both
	// exact bf16 products), then converts them to fp16 for the consumers.
	// BV 128 core forward only.
	CoreBF16FusedNoNorm CoreDtype = "bf16_fused_nonorm"
)

// coreDtypes are the dtype pairs a core variant is built for.
var coreDtypes = []CoreDtype{CoreBF16, CoreFP16, CoreBF16FP16QK, CoreBF16L2Norm, CoreBF16Fused, CoreBF16FusedNoNorm}

// Fused says whether the variants of dt do the full forward's whole
// preparation (CoreBF16Fused, CoreBF16FusedNoNorm).
func (dt CoreDtype) Fused() bool { return dt == CoreBF16Fused || dt == CoreBF16FusedNoNorm }

// HopperKernel is the kernel template of the sm_90a core forward
// (gdn_hopper.cu), instantiated per variant by HopperCfg.Entry.
const HopperKernel = "gdn_hopper_fwd"

// HopperConsumers are the consumer-warpgroup counts the Hopper kernel is
// built for: each consumer owns 64 value columns of the state, so a CTA
// covers a value tile of 64 (one consumer) or 128 (two).
var HopperConsumers = []int{1, 2}

// HopperAux is the number of aux warpgroups. Each prepares every other
// chunk: the element-wise preparation of a chunk takes longer than one
// consumer's chain, so two run side by side. With two consumers the
// register file has no room for a second aux group.
func HopperAux(consumers int) int {
	if consumers == 1 {
		return 2
	}
	return 1
}

// HopperConverters is the number of converter warpgroups: one in
// the core forward at BV 128 with bf16 q and k, where the conversion of K
// and Q to fp16 would otherwise lengthen the aux group's chain, the bound
// of that chunk; none elsewhere (fp16 q and k need no
// conversion; at BV 64 and in the transfer pass the aux groups keep it).
func HopperConverters(dt CoreDtype, consumers int, transfer bool) int {
	if consumers == 2 && (dt == CoreBF16 || dt == CoreBF16L2Norm || dt.Fused()) && !transfer {
		return 1
	}
	return 0
}

// HopperThreads is the block size of a variant: the aux warpgroups (loads,
// gates, the state-free products), the consumer warpgroups and the
// converter, if any.
func HopperThreads(dt CoreDtype, consumers int, transfer bool) int {
	return 128 * (HopperAux(consumers) + consumers + HopperConverters(dt, consumers, transfer))
}

// HopperTileWidth is the value-tile width of a CTA with that many consumers.
func HopperTileWidth(consumers int) int { return 64 * consumers }

// HopperStages is the depth of the kernel's ring of chunk stages.
const HopperStages = 3

// HopperBoxBytes is one TMA box and one stage tile: 64 token rows of 128
// bytes (64 16-bit values, or 32 fp32 of A).
const HopperBoxBytes = 64 * 128

// HopperSharedBytes mirrors the shared-memory layout of hopper_cfg.cuh (the
// kernel static_asserts the same number, define GDN_SMEM_BYTES): the stages,
// each of 8 KB tiles (K and Q: 4, V: one per consumer, A2: 1, P: 1; A
// arrives in the A2 and P tiles) plus 2 KB of gate vectors; one output
// staging tile per consumer; 1 KB of mbarriers; CoreBF16Fused's scratch for
// the inverse (HopperFusedScratchBytes); 1 KB of slack to align the dynamic
// base to the 1024 bytes the swizzled tiles need.
func HopperSharedBytes(dt CoreDtype, consumers int) int {
	c := HopperCfg{Consumers: consumers, Prep: PrepNone}
	if dt.Fused() {
		c.Prep = PrepFused
	}
	return c.SharedBytes()
}

// HopperFusedScratchBytes is the aux group's scratch of CoreBF16Fused: the
// four 16 x 16 diagonal blocks of diag(beta) L in fp32 (rows padded to 20
// floats), rounded up to whole kilobytes.
const HopperFusedScratchBytes = (4*16*20*4 + 2*64*4 + 1023) / 1024 * 1024

// The contract between Go and hopper_params.cuh's GdnHopperParams, its only
// kernel parameter: five 128-byte tensor maps (q, k, v, A, o), then eight
// pointers (g, beta, h0, ht, cu_seqlens, o, a_log, dt_bias), then ten
// 32-bit fields (scale, T, Hq, Hv, N, flags, NHt, PoolSlots, CkChunks,
// CkRows), then the serving layer's three pointers (slots, ckpt,
// ckpt_rows): 768 bytes, the maps' 64-byte alignment, with no padding. Every constant here reaches the kernel as a define and
// is static_asserted there.
const (
	HopperParamsBytes = 768
	HopperOffPtrs     = 5 * 128
	HopperOffScalars  = HopperOffPtrs + 8*8
	HopperOffState    = HopperOffScalars + 10*4
)

// Flags of GdnHopperParams.flags.
const (
	HopperFlagBetaFP32     = 1 // beta is fp32 (else the input dtype)
	HopperFlagAFP32        = 2 // A is fp32 (else bf16)
	HopperFlagSeqlensInt64 = 4 // cu_seqlens is int64 (else int32)
	// cu_seqlens holds int32 (begin, end) token pairs, one per grid row: the
	// segments of a sequence-parallel plan, in any order, gaps allowed.
	HopperFlagSegPairs = 8
	// The transfer pass of a sequence-parallel plan: no o is written; the
	// grid's x is doubled, its first half writes each segment's end state
	// from a zero start (B) to ht, its second half the segment's transfer
	// matrix M (v read as zero, h0 the identity) to ht + N*Hv*128*128 floats.
	HopperFlagTransfer = 16
	// A holds A2 itself, as the full forward's preparation writes it: fp16
	// A diag(beta), zero above the diagonal, the rows of each chunk's tokens
	// only (gdn_prep_chunk). The kernel takes the tile as loaded and only
	// clears a short chunk's rows past its end (another sequence's tokens).
	HopperFlagAPrepared = 32
	// The transfer pass starts every segment's M CTA before any B CTA (a
	// grid of more than one wave): the M CTAs of decaying heads stop early
	// and the B CTAs left over take the SMs they free, while M CTAs that
	// walk the whole segment start in the first wave. In a single wave the
	// order does not matter and the plan leaves it unset.
	HopperFlagMFirst = 64
	// CoreBF16Fused only: g holds the gate's raw input a, and the kernel
	// takes g = -exp(ALog) softplus(a + DtBias) (FLA's use_gate_in_kernel).
	HopperFlagGateInKernel = 128
	// The transfer pass of a plan whose first segments run their output
	// pass first (splitPlan.early): launched as a dependent of that pass, its
	// CTAs do not wait for it at their start; its last CTA waits for it at
	// its end, so the scan after the transfer pass finds the early pass's
	// end states written.
	HopperFlagAfterEarly = 256
	// The early pass itself (splitcall.go): the output kernel over each
	// sequence's first segment. Production kernels ignore it; a test build
	// delays the early pass's CTAs by it (HopperHooks.DelayEarlyPass).
	HopperFlagEarlyPass = 512
	// The caller's states (h0, ht or the pool, checkpoints) are [V,K]: entry
	// (k, v) at v*128 + k (else [K,V], k*128 + v).
	HopperFlagStateVK = 4096
	// The caller's states are a bf16 pool's, and so are its checkpoints:
	// widened as read, rounded to nearest even once as written.
	HopperFlagPoolBF16 = 8192
	// H0 and Ht are one pool, [S, Hv, 128, 128]: grid row n reads and
	// writes slot Slots[n], a negative slot a zero start and no store.
	HopperFlagPoolSlots = 16384
	// H0 is the plan's own fp32 [K,V] states, one per grid row (a split
	// plan's output pass): the three flags above do not apply to it.
	HopperFlagH0Own = 32768
	// Ht is the plan's own states (a split plan's early pass), likewise.
	HopperFlagHtOwn = 65536
)

// HopperStateFlags are the flags of the caller's states' format.
const HopperStateFlags = HopperFlagStateVK | HopperFlagPoolBF16 | HopperFlagPoolSlots

// HopperTensorMap describes one of the kernel's tensor maps as plain data,
// for the host to encode (cuTensorMapEncodeTiled, 128-byte swizzle): a
// token-major tensor viewed as 4-D (Inner, Heads, T, B), Inner elements of
// ElemBytes a row, read in boxes of (BoxInner, 1, 64, 1): 64 tokens of one
// head, 128 bytes each, one stage tile (HopperBoxBytes).
type HopperTensorMap struct {
	ElemBytes, Inner, Heads, T, B, BoxInner int
}

// HopperTokenBox is the token rows of every box: a chunk.
const HopperTokenBox = 64

// Dims are the map's dimensions, innermost first.
func (m HopperTensorMap) Dims() []uint64 {
	return []uint64{uint64(m.Inner), uint64(m.Heads), uint64(m.T), uint64(m.B)}
}

// Strides are the byte strides of the dimensions past the innermost.
func (m HopperTensorMap) Strides() []uint64 {
	row := uint64(m.Inner) * uint64(m.ElemBytes)
	return []uint64{row, row * uint64(m.Heads), row * uint64(m.Heads) * uint64(m.T)}
}

// Box is the box the kernel loads or stores.
func (m HopperTensorMap) Box() []uint32 { return []uint32{uint32(m.BoxInner), 1, HopperTokenBox, 1} }

// BoxBytes is the size of one box.
func (m HopperTensorMap) BoxBytes() int { return m.BoxInner * m.ElemBytes * HopperTokenBox }

// HopperParams are the values of GdnHopperParams; Pack lays them out.
type HopperParams struct {
	MapQ, MapK, MapV, MapA, MapO  [128]byte // encoded CUtensorMaps
	G, Beta, H0, Ht, CuSeqlens, O uintptr   // device addresses (0: absent)
	ALog, DtBias                  uintptr   // HopperFlagGateInKernel only
	Scale                         float32
	T, Hq, Hv, N, Flags           int32
	NHt                           int32   // ht is written for grid rows n < NHt only
	PoolSlots                     int32   // S under HopperFlagPoolSlots
	CkChunks                      int32   // chunks between checkpoints (checkpoint_every / 64); 0: none
	CkRows                        int32   // checkpoint rows R
	Slots                         uintptr // HopperFlagPoolSlots: int32 [N], each sequence's slot
	Ckpt                          uintptr // checkpoints [R, Hv, 128, 128] in the caller's format (0: none)
	// CkptRows: int32 per grid row, start*CkChunks + c0 (the first
	// checkpoint row of the row's sequence, the row's first chunk in it):
	// a split plan's passes. 0: grid row n is sequence n.
	CkptRows uintptr
}

// Pack writes the parameter block the kernel takes by value, little endian.
func (p *HopperParams) Pack(b *[HopperParamsBytes]byte) {
	for i, m := range [...]*[128]byte{&p.MapQ, &p.MapK, &p.MapV, &p.MapA, &p.MapO} {
		copy(b[128*i:], m[:])
	}
	for i, v := range [...]uintptr{p.G, p.Beta, p.H0, p.Ht, p.CuSeqlens, p.O, p.ALog, p.DtBias} {
		binary.LittleEndian.PutUint64(b[HopperOffPtrs+8*i:], uint64(v))
	}
	binary.LittleEndian.PutUint32(b[HopperOffScalars:], math.Float32bits(p.Scale))
	for i, v := range [...]int32{p.T, p.Hq, p.Hv, p.N, p.Flags, p.NHt, p.PoolSlots, p.CkChunks, p.CkRows} {
		binary.LittleEndian.PutUint32(b[HopperOffScalars+4+4*i:], uint32(v))
	}
	for i, v := range [...]uintptr{p.Slots, p.Ckpt, p.CkptRows} {
		binary.LittleEndian.PutUint64(b[HopperOffState+8*i:], uint64(v))
	}
}

// HopperCfg is the Go side of hopper_cfg.cuh's HopperCfg: the choices
// that make a Hopper variant. The kernel derives everything else from
// them (warpgroups, registers, the shared-memory layout) and checks the
// numbers Go launches with (Threads, SharedBytes) by static_assert.
type HopperCfg struct {
	VFP16     bool // v and o are fp16 (else bf16)
	QKFP16    bool // q and k are fp16 (else bf16)
	Consumers int  // consumer warpgroups: 1 or 2 (BV 64 or 128)
	Transfer  bool // the transfer pass of a sequence-parallel plan
	Prep      HopperPrep
	// States: the states variant, which reads and writes the caller's
	// states in the serving layer's formats too (a pool through its slot
	// table, [V,K], a bf16 pool: HopperStateFlags) and, but for the fused
	// preparations, keeps checkpoints. The core forward only; the variants
	// without it have none of that code, so calls without those arguments
	// run exactly the kernels they always did.
	States bool
}

// HopperPrep is how much of the full forward's preparation a Hopper
// variant does itself (hopper_cfg.cuh's Prep).
type HopperPrep string

// The preparations: none (g cumulative, A or A2 given), norm (the L2 norm
// of q and k, A2 given), fused (the norm and the whole preparation),
// fused_nonorm (the whole preparation without the norm).
const (
	PrepNone        HopperPrep = "none"
	PrepNorm        HopperPrep = "norm"
	PrepFused       HopperPrep = "fused"
	PrepFusedNoNorm HopperPrep = "fused_nonorm"
)

// HopperCfgOf returns the configuration of the Hopper variant for a dtype
// pair, a consumer count (1 or 2) and a pass.
func HopperCfgOf(dt CoreDtype, consumers int, transfer bool) (HopperCfg, error) {
	c := HopperCfg{Consumers: consumers, Transfer: transfer, Prep: PrepNone}
	switch dt {
	case CoreBF16FP16QK:
		c.QKFP16 = true
	case CoreBF16L2Norm, CoreBF16Fused, CoreBF16FusedNoNorm:
		if consumers != 2 || transfer {
			return HopperCfg{}, fmt.Errorf("kernsrc: hopper %s: a BV 128 core forward only (its converter normalises or prepares)", dt)
		}
		c.Prep = map[CoreDtype]HopperPrep{CoreBF16L2Norm: PrepNorm, CoreBF16Fused: PrepFused, CoreBF16FusedNoNorm: PrepFusedNoNorm}[dt]
	default:
		fp16, err := fp16Define(dt, "hopper")
		if err != nil {
			return HopperCfg{}, err
		}
		c.VFP16, c.QKFP16 = fp16 == 1, fp16 == 1
	}
	if consumers != 1 && consumers != 2 {
		return HopperCfg{}, fmt.Errorf("kernsrc: hopper consumers %d: want 1 or 2", consumers)
	}
	return c, nil
}

// Entry is the kernel's NVRTC name expression for the configuration.
func (c HopperCfg) Entry() string {
	elt := func(fp16 bool) string {
		if fp16 {
			return "Elt::fp16"
		}
		return "Elt::bf16"
	}
	pass := "Pass::forward"
	if c.Transfer {
		pass = "Pass::transfer"
	}
	states := ""
	if c.States {
		states = ", true"
	}
	return fmt.Sprintf("%s<HopperCfg<%s, %s, %d, %s, Prep::%s%s>>", HopperKernel, elt(c.VFP16), elt(c.QKFP16), c.Consumers, pass, c.Prep, states)
}

// Fused says whether the configuration does the full forward's whole
// preparation.
func (c HopperCfg) Fused() bool { return c.Prep == PrepFused || c.Prep == PrepFusedNoNorm }

// Converters is the number of converter warpgroups: one at BV 128 with bf16
// q and k in the core forward (HopperConverters).
func (c HopperCfg) Converters() int {
	if c.Consumers == 2 && !c.QKFP16 && !c.Transfer {
		return 1
	}
	return 0
}

// Threads is the block size (HopperThreads).
func (c HopperCfg) Threads() int {
	return 128 * (HopperAux(c.Consumers) + c.Consumers + c.Converters())
}

// SharedBytes is the dynamic shared memory (HopperSharedBytes).
func (c HopperCfg) SharedBytes() int {
	const tile = HopperBoxBytes
	stage := (4+c.Consumers+1+1)*tile + 2048
	n := HopperStages*stage + c.Consumers*tile + 1024 + 1024
	if c.Fused() {
		n += HopperFusedScratchBytes
	}
	return n
}

// StaticSharedBytes is the kernel's static shared memory: the fused
// kernels keep their ring's barriers there (hopper_cfg.cuh, kStaticRing),
// five signals of three stages; the others none. The dynamic
// (SharedBytes) and the static together must fit the 227 KB a block may
// have.
func (c HopperCfg) StaticSharedBytes() int {
	if c.Fused() {
		return 5 * HopperStages * 8
	}
	return 0
}

// Variant is the catalogue entry of the configuration, named name.
func (c HopperCfg) Variant(name string) Variant {
	return Variant{Name: name, File: "gdn_hopper.cu", Kernel: c.Entry(), Defines: append(hopperContract(),
		fmt.Sprintf("GDN_THREADS=%d", c.Threads()),
		fmt.Sprintf("GDN_SMEM_BYTES=%d", c.SharedBytes()))}
}

// hopperContract is the family's side of the parameter block's contract,
// as defines that hopper_params.cuh static_asserts.
func hopperContract() []string {
	return []string{
		fmt.Sprintf("GDN_PARAMS_BYTES=%d", HopperParamsBytes),
		fmt.Sprintf("GDN_OFF_PTRS=%d", HopperOffPtrs),
		fmt.Sprintf("GDN_OFF_SCALARS=%d", HopperOffScalars),
		fmt.Sprintf("GDN_OFF_STATE=%d", HopperOffState),
		fmt.Sprintf("GDN_TMA_BOX_BYTES=%d", HopperBoxBytes),
		fmt.Sprintf("GDN_FLAG_BETA_FP32=%d", HopperFlagBetaFP32),
		fmt.Sprintf("GDN_FLAG_A_FP32=%d", HopperFlagAFP32),
		fmt.Sprintf("GDN_FLAG_SEQLENS_INT64=%d", HopperFlagSeqlensInt64),
		fmt.Sprintf("GDN_FLAG_SEG_PAIRS=%d", HopperFlagSegPairs),
		fmt.Sprintf("GDN_FLAG_TRANSFER=%d", HopperFlagTransfer),
		fmt.Sprintf("GDN_FLAG_A_PREPARED=%d", HopperFlagAPrepared),
		fmt.Sprintf("GDN_FLAG_M_FIRST=%d", HopperFlagMFirst),
		fmt.Sprintf("GDN_FLAG_GATE_IN_KERNEL=%d", HopperFlagGateInKernel),
		fmt.Sprintf("GDN_FLAG_AFTER_EARLY=%d", HopperFlagAfterEarly),
		fmt.Sprintf("GDN_FLAG_EARLY_PASS=%d", HopperFlagEarlyPass),
		fmt.Sprintf("GDN_FLAG_STATE_VK=%d", HopperFlagStateVK),
		fmt.Sprintf("GDN_FLAG_POOL_BF16=%d", HopperFlagPoolBF16),
		fmt.Sprintf("GDN_FLAG_POOL_SLOTS=%d", HopperFlagPoolSlots),
		fmt.Sprintf("GDN_FLAG_H0_OWN=%d", HopperFlagH0Own),
		fmt.Sprintf("GDN_FLAG_HT_OWN=%d", HopperFlagHtOwn),
	}
}

// HopperVariant returns the Hopper core-forward variant for an input dtype
// and a consumer count (1 or 2).
func HopperVariant(dt CoreDtype, consumers int) (Variant, error) {
	return hopperVariant(dt, consumers, false)
}

// HopperTransferVariant returns the transfer pass of a sequence-parallel
// plan (launched with HopperFlagTransfer): the same kernel built without
// q, P and o, which that pass does not need.
func HopperTransferVariant(dt CoreDtype, consumers int) (Variant, error) {
	return hopperVariant(dt, consumers, true)
}

// fp16Define is 1 for fp16 inputs, 0 for bf16.
func fp16Define(dt CoreDtype, family string) (int, error) {
	switch dt {
	case CoreBF16:
		return 0, nil
	case CoreFP16:
		return 1, nil
	}
	return 0, fmt.Errorf("kernsrc: %s dtype %q: want bf16 or fp16", family, dt)
}

func hopperVariant(dt CoreDtype, consumers int, transfer bool) (Variant, error) {
	c, err := HopperCfgOf(dt, consumers, transfer)
	if err != nil {
		return Variant{}, err
	}
	name := fmt.Sprintf("gdn_hopper_%s_bv%d", dt, HopperTileWidth(consumers))
	if transfer {
		name += "_transfer"
	}
	return c.Variant(name), nil
}

// HopperCfgOfVariant returns the configuration of a catalogue Hopper
// variant (a states variant's too), found by its name; false for any
// other variant.
func HopperCfgOfVariant(v Variant) (HopperCfg, bool) {
	for _, transfer := range []bool{false, true} {
		for _, dt := range coreDtypes {
			for _, nc := range HopperConsumers {
				c, err := HopperCfgOf(dt, nc, transfer)
				if err != nil {
					continue
				}
				if c.Entry() == v.Kernel {
					return c, true
				}
				if c.States = !transfer; c.States && c.Entry() == v.Kernel {
					return c, true
				}
			}
		}
	}
	return HopperCfg{}, false
}

// HopperVariants lists every Hopper variant (each dtype pair and consumer count,
// the core forward and the transfer pass).
func HopperVariants() []Variant {
	var out []Variant
	for _, transfer := range []bool{false, true} {
		for _, dt := range coreDtypes {
			for _, nc := range HopperConsumers {
				if v, err := hopperVariant(dt, nc, transfer); err == nil {
					out = append(out, v)
				}
			}
		}
	}
	return out
}
