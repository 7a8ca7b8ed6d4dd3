package gdn

import (
	"fmt"

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
// The kernel (gdn_hopper.cu) runs one CTA (it takes most of the shared
// memory, so one per multiprocessor) per (sequence, value head, value tile).
// Its value tile is 128 wide (two consumer warpgroups share one aux
// warpgroup's work: the gates, A2 and P are computed once per head) unless
// that leaves most multiprocessors idle: with fewer (sequence, head) pairs
// than half the multiprocessors, 64-wide tiles double the CTAs at the price
// of repeating the aux work per tile.
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
func PlanCoreVariant(p Problem, name string) (Plan, error) {
	for _, nc := range kernsrc.HopperConsumers {
		v, err := kernsrc.HopperVariant(coreDtype(p.Dtype), nc)
		if err == nil && v.Name == name {
			return planHopper(p, nc)
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
		TileWidth:   bv,
		Grid:        [3]uint32{uint32(p.Hv * HeadDim / bv), uint32(p.N), 1},
		Block:       [3]uint32{uint32(kernsrc.HopperThreads(consumers)), 1, 1},
		SharedBytes: kernsrc.HopperSharedBytes(consumers),
	}, nil
}
