package gdn

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gdnjit/gdn/kernsrc"
)

// Plan is how one problem runs: which kernel variant, its launch geometry.
// It is a value, computed from the problem and the device alone.
type Plan struct {
	Variant     kernsrc.Variant
	Hopper      bool // the sm_90a kernel (gdn_hopper.cu): TMA maps in its parameters
	TileWidth   int  // value columns per CTA (BV)
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes int
}

func (pl Plan) String() string {
	return fmt.Sprintf("%s grid=%v block=%v smem=%d", pl.Variant.Name, pl.Grid, pl.Block, pl.SharedBytes)
}

// PlanCore chooses the kernel variant and launch geometry of a core forward
// on a device with sms multiprocessors (a MIG slice has few). p comes from
// ValidateCore.
//
// The Hopper kernel runs one CTA (it takes most of the shared memory, so one
// per multiprocessor) per (sequence, value head, value tile). Its value tile
// is 128 wide (two consumer warpgroups share one aux warpgroup's work: the
// gates, Q K^T and W0 are computed once per head) unless that leaves most
// multiprocessors idle: with fewer (sequence, head) pairs than half the
// multiprocessors, 64-wide tiles double the CTAs at the price of repeating
// the aux work per tile.
func PlanCore(p Problem, sms int) (Plan, error) {
	consumers := 2
	if 2*p.N*p.Hv <= sms {
		consumers = 1
	}
	return planHopper(p, consumers)
}

// PlanCoreVariant plans a core forward with the named kernel variant
// instead of the planner's choice, for tests and benchmarks that must cover
// every variant whatever the device. The variant must suit the problem's
// dtype.
//
// "gdn_core" names the mma.sync kernel family with its own tile rule: the
// 32-wide tile when its CTAs fit in one wave of 132 multiprocessors.
func PlanCoreVariant(p Problem, name string) (Plan, error) {
	if name == "gdn_core" {
		if p.N*p.Hv*(HeadDim/32) <= 132 {
			return planMMA(p, 32)
		}
		return planMMA(p, 64)
	}
	for _, nc := range kernsrc.HopperConsumers {
		v, err := kernsrc.HopperVariant(coreDtype(p.Dtype), nc)
		if err == nil && v.Name == name {
			return planHopper(p, nc)
		}
	}
	for _, bv := range kernsrc.CoreTileWidths {
		v, err := kernsrc.CoreVariant(coreDtype(p.Dtype), bv)
		if err == nil && v.Name == name {
			return planMMA(p, bv)
		}
	}
	return Plan{}, argErrorf("variant", "%q is not a core-forward variant for %v inputs", name, p.Dtype)
}

func coreDtype(d Dtype) kernsrc.CoreDtype {
	if d == FP16 {
		return kernsrc.CoreFP16
	}
	return kernsrc.CoreBF16
}

func planHopper(p Problem, consumers int) (Plan, error) {
	v, err := kernsrc.HopperVariant(coreDtype(p.Dtype), consumers)
	if err != nil {
		return Plan{}, err
	}
	bv := kernsrc.HopperTileWidth(consumers)
	return Plan{
		Variant:     v,
		Hopper:      true,
		TileWidth:   bv,
		Grid:        [3]uint32{uint32(p.Hv * HeadDim / bv), uint32(p.N), 1},
		Block:       [3]uint32{uint32(kernsrc.HopperThreads(consumers)), 1, 1},
		SharedBytes: kernsrc.HopperSharedBytes(consumers),
	}, nil
}

// planMMA plans the mma.sync kernel (gdn_core.cu) with a value tile of bv.
func planMMA(p Problem, bv int) (Plan, error) {
	v, err := kernsrc.CoreVariant(coreDtype(p.Dtype), bv)
	if err != nil {
		return Plan{}, err
	}
	tiles := HeadDim / bv
	return Plan{
		Variant:     v,
		TileWidth:   bv,
		Grid:        [3]uint32{uint32(p.Hv * tiles), uint32(p.N), 1},
		Block:       [3]uint32{uint32(kernsrc.CoreThreads(bv)), 1, 1},
		SharedBytes: kernsrc.CoreSharedBytes(bv),
	}, nil
}

// Flags of GdnCoreParams.flags (gdn_core.cu).
const (
	coreFlagBetaFP32     = 1
	coreFlagAFP32        = 2
	coreFlagSeqlensInt64 = 4
)

// coreParamsSize is sizeof(GdnCoreParams): ten pointers and six 32-bit fields.
const coreParamsSize = 10*8 + 6*4

// packCoreParams lays out GdnCoreParams (gdn_core.cu) byte for byte, little
// endian, for passing by value.
func packCoreParams(a *CoreArgs, p Problem) []byte {
	b := make([]byte, coreParamsSize)
	ptrs := []uintptr{a.Q.Ptr, a.K.Ptr, a.V.Ptr, a.G.Ptr, a.Beta.Ptr, a.A.Ptr, 0, a.O.Ptr, 0, 0}
	if p.HasH0 {
		ptrs[6] = a.H0.Ptr
	}
	if p.HasHt {
		ptrs[8] = a.Ht.Ptr
	}
	if p.Seqs != nil {
		ptrs[9] = a.CuSeqlensDevice.Ptr
	}
	for i, v := range ptrs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	flags := int32(0)
	if p.BetaDtype == FP32 {
		flags |= coreFlagBetaFP32
	}
	if p.ADtype == FP32 {
		flags |= coreFlagAFP32
	}
	if p.SeqlensDtype == Int64 {
		flags |= coreFlagSeqlensInt64
	}
	o := 80
	binary.LittleEndian.PutUint32(b[o:], math.Float32bits(p.Scale))
	for i, v := range []int32{int32(p.T), int32(p.Hq), int32(p.Hv), int32(p.N), flags} {
		binary.LittleEndian.PutUint32(b[o+4+4*i:], uint32(v))
	}
	return b
}
