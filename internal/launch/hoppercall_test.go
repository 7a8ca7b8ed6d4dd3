package launch

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/kernsrc"
)

// The packed parameter block must match struct GdnHopperParams in
// gdn_hopper.cu: five tensor maps, then the pointers, then the scalars.
func TestPackHopperParamsLayout(t *testing.T) {
	hp := kernsrc.HopperParams{G: 0x1000, Beta: 0x2000, H0: 0x3000, Ht: 0, CuSeqlens: 0xABC000, O: 0x5000,
		ALog: 0x6000, DtBias: 0x7000, Scale: 0.5, T: 100, Hq: 2, Hv: 8, N: 1, Flags: kernsrc.HopperFlagAFP32 | kernsrc.HopperFlagSeqlensInt64, NHt: 1}
	for i := range hp.MapQ {
		hp.MapQ[i], hp.MapK[i], hp.MapV[i], hp.MapA[i], hp.MapO[i] = 1, 2, 3, 4, 5
	}
	var b [kernsrc.HopperParamsBytes]byte
	for i := range b {
		b[i] = 0xee // Pack must write every byte, the padding too
	}
	hp.Pack(&b)
	for m := 0; m < 5; m++ {
		for i := 0; i < 128; i++ {
			if b[128*m+i] != byte(m+1) {
				t.Fatalf("tensor map %d byte %d: %d", m, i, b[128*m+i])
			}
		}
	}
	want := []uintptr{0x1000, 0x2000, 0x3000, 0, 0xABC000, 0x5000, 0x6000, 0x7000}
	for i, w := range want {
		if got := uintptr(binary.LittleEndian.Uint64(b[kernsrc.HopperOffPtrs+8*i:])); got != w {
			t.Errorf("pointer %d: %#x, want %#x", i, got, w)
		}
	}
	if s := math.Float32frombits(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars:])); s != 0.5 {
		t.Errorf("scale %v", s)
	}
	ints := []int32{100, 2, 8, 1, kernsrc.HopperFlagAFP32 | kernsrc.HopperFlagSeqlensInt64, 1}
	for i, w := range ints {
		if got := int32(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars+4+4*i:])); got != w {
			t.Errorf("int field %d: %d, want %d", i, got, w)
		}
	}
	for i := kernsrc.HopperOffScalars + 28; i < len(b); i++ {
		if b[i] != 0 {
			t.Fatalf("padding byte %d: %#x", i, b[i])
		}
	}
}

// Packed sequences rewritten in place with other boundaries but the same
// chains must not share a prepared call: the split tables hold positions.
func TestHopperCallKeyHoldsBoundaries(t *testing.T) {
	a, b := hashSeqs([]int{0, 100, 300}), hashSeqs([]int{0, 200, 300})
	if a == b || hashSeqs(nil) == a {
		t.Fatalf("hashes %x %x", a, b)
	}
}

// The core forward of a full call takes A2 as the preparation wrote it:
// dtype.FP16, half the bytes of an fp32 A, loaded by a 64-column fp16 tensor map
// and flagged so that the kernel does not build it again. A public problem.Core
// with an dtype.FP16 A is still refused.
func TestFullCoreTakesPreparedA(t *testing.T) {
	a := problemtest.Full(2, 100, 2, 4)
	core := a.CoreTemplate(a.Q, a.K, 1<<20, 1<<24)
	p, err := problem.ValidateCore(&core)
	if err != nil {
		t.Fatal(err)
	}
	if p.ADtype != dtype.FP16 || core.A.Bytes != 2*100*4*problem.ChunkLen*2 {
		t.Fatalf("A %v, %d bytes", p.ADtype, core.A.Bytes)
	}
	var f fakeEncoder
	hp, err := newHopperCall(&core, p).hopperParams(f.encode)
	if err != nil {
		t.Fatal(err)
	}
	if hp.Flags&kernsrc.HopperFlagAPrepared == 0 || hp.Flags&kernsrc.HopperFlagAFP32 != 0 {
		t.Errorf("flags %#x", hp.Flags)
	}
	if dt, box0 := driver.TensorDtype(hp.MapA[8]), binary.LittleEndian.Uint32(hp.MapA[72:]); dt != driver.TensorF16 || box0 != problem.ChunkLen {
		t.Errorf("A's map: dtype %v, box %d", dt, box0)
	}
	public := core
	public.APrepared = false
	var ae *gdnerr.ArgError
	if _, err := problem.ValidateCore(&public); !errors.As(err, &ae) || ae.Arg != "A" {
		t.Errorf("public dtype.FP16 A: %v", err)
	}
}

// The core call of a fused full forward (the preparation in the core
// kernel) reads the caller's raw g, plans the fused variant, and with
// GateInKernel carries the gate's flag and parameters into the block;
// without it, neither. With the in-core norm it plans CoreBF16Fused,
// without it CoreBF16FusedNoNorm; fp16 inputs are refused.
func TestFusedCoreCall(t *testing.T) {
	hv := problem.Tensor{Ptr: 1 << 30, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}}
	dt := problem.Tensor{Ptr: 1<<30 + 4096, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}}
	for _, c := range []struct{ gate, norm bool }{{false, true}, {true, true}, {false, false}, {true, false}} {
		gate := c.gate
		a := problemtest.Full(2, 100, 2, 4)
		core := a.CoreTemplate(a.Q, a.K, 0, 0)
		core.QKNorm, core.Fused = c.norm, true
		if gate {
			core.GateInKernel, core.ALog, core.DtBias = true, hv, dt
		}
		want := kernsrc.CoreBF16Fused
		if !c.norm {
			want = kernsrc.CoreBF16FusedNoNorm
		}
		p, err := problem.ValidateCore(&core)
		if err != nil || !p.Fused || p.QKNorm != c.norm || plan.CoreDtype(p) != want {
			t.Fatalf("gate %v norm %v: %+v, %v", gate, c.norm, p, err)
		}
		var f fakeEncoder
		hp, err := newHopperCall(&core, p).hopperParams(f.encode)
		if err != nil {
			t.Fatal(err)
		}
		if hp.G != a.G.Ptr {
			t.Errorf("gate %v: g %#x, want the caller's %#x", gate, hp.G, a.G.Ptr)
		}
		got := hp.Flags&kernsrc.HopperFlagGateInKernel != 0
		if got != gate || gate && (hp.ALog != hv.Ptr || hp.DtBias != dt.Ptr) || !gate && (hp.ALog != 0 || hp.DtBias != 0) {
			t.Errorf("gate %v: flag %v, A_log %#x, dt_bias %#x", gate, got, hp.ALog, hp.DtBias)
		}
	}
	a := problemtest.Full(2, 100, 2, 4)
	for _, x := range []*problem.Tensor{&a.Q, &a.K, &a.V, &a.O} {
		x.Dtype = dtype.FP16
	}
	core := a.CoreTemplate(a.Q, a.K, 0, 0)
	if _, err := problem.ValidateCore(&core); err != nil {
		t.Fatalf("the same call on fp16, not fused: %v", err)
	}
	core.Fused = true
	var ae *gdnerr.ArgError
	if _, err := problem.ValidateCore(&core); !errors.As(err, &ae) || ae.Arg != "q" || !strings.Contains(err.Error(), "fused") {
		t.Errorf("a fused call on fp16 inputs: %v, want an error naming q and the fused preparation", err)
	}
	var none *scratch.Lease // a fused call has no scratch: keeping and releasing it are no-ops, not panics
	none.Keep()
	none.Release()
	if none.Kept() {
		t.Error("no lease reported kept")
	}
}
