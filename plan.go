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
	TileWidth   int // value columns per CTA (BV)
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
// One CTA (one per multiprocessor: it takes most of the shared memory) runs
// one (sequence, value head, value tile) chain of chunks. The 64-wide tile
// repeats Q K^T half as often as the 32-wide one; the 32-wide tile is chosen
// when its CTAs still fit in one wave, since then twice the chains run at
// once at no cost.
func PlanCore(p Problem, sms int) (Plan, error) {
	bv := 64
	if p.N*p.Hv*(HeadDim/32) <= sms {
		bv = 32
	}
	dt := kernsrc.CoreBF16
	if p.Dtype == FP16 {
		dt = kernsrc.CoreFP16
	}
	v, err := kernsrc.CoreVariant(dt, bv)
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
