package gdn

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// fullArgs are valid full-forward arguments (A absent, g raw).
func fullArgs(b, t, hq, hv int) *FullArgs {
	c := goodArgs(b, t, hq, hv)
	return &FullArgs{Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, H0: c.H0, O: c.O, Ht: c.Ht}
}

// ValidateFull accepts what the full forward takes and names the argument
// of what it does not: the gate's parameters only with GateInKernel, of
// shape [Hv] in fp32; everything else as ValidateCore.
func TestValidateFull(t *testing.T) {
	a := fullArgs(2, 100, 2, 4)
	p, err := ValidateFull(a)
	if err != nil || p.Hv != 4 || p.N != 2 || p.ADtype != FP16 {
		t.Fatalf("valid args: %+v, %v", p, err)
	}
	hv := Tensor{Ptr: 1 << 30, Bytes: 16, Dtype: FP32, Shape: []int{4}}
	cases := map[string]func(*FullArgs){
		"a_log":   func(a *FullArgs) { a.GateInKernel = true },
		"dt_bias": func(a *FullArgs) { a.GateInKernel, a.ALog = true, hv },
		"q":       func(a *FullArgs) { a.Q.Shape = []int{2, 100, 2} },
		"g":       func(a *FullArgs) { a.G.Dtype = BF16 },
	}
	for want, mutate := range cases {
		b := *fullArgs(2, 100, 2, 4)
		mutate(&b)
		_, err := ValidateFull(&b)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != want || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", want, err)
		}
	}
	b := *fullArgs(2, 100, 2, 4)
	b.ALog = hv
	if _, err := ValidateFull(&b); err == nil {
		t.Error("A_log without GateInKernel accepted")
	}
	b.GateInKernel, b.DtBias = true, hv
	if _, err := ValidateFull(&b); err != nil {
		t.Errorf("gate in kernel: %v", err)
	}
	if _, err := ValidateFull(nil); err == nil {
		t.Error("nil accepted")
	}
}

// The core forward of a full call takes A2 as the preparation wrote it:
// FP16, half the bytes of an fp32 A, loaded by a 64-column fp16 tensor map
// and flagged so that the kernel does not build it again. A public CoreArgs
// with an FP16 A is still refused.
func TestFullCoreTakesPreparedA(t *testing.T) {
	a := fullArgs(2, 100, 2, 4)
	core := a.coreTemplate(a.Q, a.K, 1<<20, 1<<24)
	p, err := ValidateCore(&core)
	if err != nil {
		t.Fatal(err)
	}
	if p.ADtype != FP16 || core.A.Bytes != 2*100*4*ChunkLen*2 {
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
	if dt, box0 := driver.TensorDtype(hp.MapA[8]), binary.LittleEndian.Uint32(hp.MapA[72:]); dt != driver.TensorF16 || box0 != ChunkLen {
		t.Errorf("A's map: dtype %v, box %d", dt, box0)
	}
	public := core
	public.aPrepared = false
	var ae *ArgError
	if _, err := ValidateCore(&public); !errors.As(err, &ae) || ae.Arg != "A" {
		t.Errorf("public FP16 A: %v", err)
	}
}

// The core call of a fused full forward (the preparation in the core
// kernel) reads the caller's raw g, plans the fused variant, and with
// GateInKernel carries the gate's flag and parameters into the block;
// without it, neither. With the in-core norm it plans CoreBF16Fused,
// without it CoreBF16FusedNoNorm; fp16 inputs are refused.
func TestFusedCoreCall(t *testing.T) {
	hv := Tensor{Ptr: 1 << 30, Bytes: 16, Dtype: FP32, Shape: []int{4}}
	dt := Tensor{Ptr: 1<<30 + 4096, Bytes: 16, Dtype: FP32, Shape: []int{4}}
	for _, c := range []struct{ gate, norm bool }{{false, true}, {true, true}, {false, false}, {true, false}} {
		gate := c.gate
		a := fullArgs(2, 100, 2, 4)
		core := a.coreTemplate(a.Q, a.K, 0, 0)
		core.qkNorm, core.fused = c.norm, true
		if gate {
			core.gateInKernel, core.aLog, core.dtBias = true, hv, dt
		}
		want := kernsrc.CoreBF16Fused
		if !c.norm {
			want = kernsrc.CoreBF16FusedNoNorm
		}
		p, err := ValidateCore(&core)
		if err != nil || !p.Fused || p.QKNorm != c.norm || coreDtype(p) != want {
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
	a := fullArgs(2, 100, 2, 4)
	for _, x := range []*Tensor{&a.Q, &a.K, &a.V, &a.O} {
		x.Dtype = FP16
	}
	core := a.coreTemplate(a.Q, a.K, 0, 0)
	if _, err := ValidateCore(&core); err != nil {
		t.Fatalf("the same call on fp16, not fused: %v", err)
	}
	core.fused = true
	var ae *ArgError
	if _, err := ValidateCore(&core); !errors.As(err, &ae) || ae.Arg != "q" || !strings.Contains(err.Error(), "fused") {
		t.Errorf("a fused call on fp16 inputs: %v, want an error naming q and the fused preparation", err)
	}
	var s scratchSlabs
	s.pin(nil) // a fused call has no slab: pinning it is a no-op, not a panic
}

// chunkPairs cuts every sequence into 64-token chunks, the last shorter,
// none across two sequences, empty sequences none.
func TestChunkPairs(t *testing.T) {
	p := Problem{B: 1, T: 200, N: 4, Seqs: []int{0, 0, 1, 130, 200}}
	got := chunkPairs(p)
	want := []int32{0, 1, 1, 65, 65, 129, 129, 130, 130, 194, 194, 200}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if got := chunkPairs(Problem{B: 2, T: 64, N: 2}); len(got) != 4 || got[2] != 64 || got[3] != 128 {
		t.Fatalf("batch: %v", got)
	}
}

// The prepared full calls hold at most fullScratchLimit bytes of scratch
// (the newest whatever its size); evicted scratch is parked in the
// graveyard, or kept until Close when the call was captured into a caller's
// graph; Close frees it all after one synchronisation.
func TestFullCacheScratch(t *testing.T) {
	f := newFakeScratch()
	g := &scratchGraveyard{dev: f}
	c := newFullCache()
	mk := func(i int, bytes int, pinned bool) *fullCall {
		p, _ := f.Alloc(bytes)
		e := &fullCall{key: fullKey{b: i}, dev: f, grave: g, mem: p, memBytes: bytes}
		e.pinned.Store(pinned)
		return e
	}
	var pinnedMem driver.DevicePtr
	for i, pinned := range []bool{true, false, false} {
		e := mk(i, 900<<20, pinned)
		if pinned {
			pinnedMem = e.mem
		}
		e, err := c.held.put(e.key, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.held.release(e)
	}
	if len(c.held.entries) != 2 || c.held.scratch != 1800<<20 {
		t.Fatalf("%d entries, %d bytes of scratch; want 2, 1800 MB", len(c.held.entries), c.held.scratch)
	}
	bigCall := mk(9, 3<<30, false)
	big, err := c.held.put(bigCall.key, bigCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.held.release(big)
	if len(c.held.entries) != 1 || c.held.entries[fullKey{b: 9}] != big {
		t.Fatalf("a call over the limit must stay alone: %d entries", len(c.held.entries))
	}
	// Three calls were evicted; their scratch was freed after a
	// synchronisation, except the captured one's, kept until Close.
	if _, ok := f.live[pinnedMem]; !ok || len(f.live) != 2 || f.syncs == 0 {
		t.Fatalf("captured call's scratch live %v; %d live, %d syncs", ok, len(f.live), f.syncs)
	}
	c.held.close()
	g.close()
	if len(f.live) != 0 {
		t.Fatalf("after close: %d live", len(f.live))
	}
}

// fullHostArgs is a small packed full call with every optional input: the
// gate's raw input with A_log and dt_bias, h0, the final state.
func fullHostArgs() *HostFullArgs {
	c := layoutArgs()
	return &HostFullArgs{B: c.B, T: c.T, Hq: c.Hq, Hv: c.Hv, CuSeqlens: c.CuSeqlens, Dtype: c.Dtype,
		Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, ALog: []float32{-1.5, 0.25}, DtBias: []float32{0.5, -2}, H0: c.H0,
		FinalState: true, L2Norm: true, GateInKernel: true}
}

// The FullArgs of a full host call, bound to an address, pass ValidateFull:
// the gate's parameters are there exactly when GateInKernel is on, the
// switches travel, no A is laid out, and the tensors do not overlap.
func TestFullHostLayoutValidates(t *testing.T) {
	for _, edit := range []func(h *HostFullArgs){
		func(h *HostFullArgs) {},
		func(h *HostFullArgs) { h.Dtype, h.BetaDtype, h.SeqlensDtype, h.L2Norm = FP16, FP16, Int64, false },
		func(h *HostFullArgs) {
			h.ALog, h.DtBias, h.GateInKernel, h.H0, h.FinalState, h.CuSeqlens = nil, nil, false, nil, false, nil
		},
	} {
		h := fullHostArgs()
		edit(h)
		l, err := newFullHostLayout(h)
		if err != nil {
			t.Fatal(err)
		}
		a := l.fullArgs(layoutBase)
		p, err := ValidateFull(a)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if a.L2Norm != h.L2Norm || a.GateInKernel != h.GateInKernel || a.ALog.Present() != h.GateInKernel ||
			a.DtBias.Present() != h.GateInKernel || p.HasH0 != (h.H0 != nil) || p.HasHt != h.FinalState || p.Dtype != h.Dtype {
			t.Errorf("args %+v (problem %+v) from %+v", a, p, h)
		}
		if l.tensors[tensorA].Shape != nil {
			t.Error("a full call lays out an A")
		}
		checkPlacement(t, l)
	}
}

// A_log and dt_bias are copied as they are (fp32), beside the rest.
func TestFullHostLayoutEncodes(t *testing.T) {
	h := fullHostArgs()
	l, err := newFullHostLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, l.total)
	l.encodeInputs(buf)
	a := l.fullArgs(0)
	for _, x := range []struct {
		t    Tensor
		want []float32
	}{{a.ALog, h.ALog}, {a.DtBias, h.DtBias}, {a.G, h.G}} {
		got := asFloat32(buf[x.t.Ptr:], len(x.want))
		for i := range x.want {
			if got[i] != x.want[i] {
				t.Fatalf("value %d = %v, want %v", i, got[i], x.want[i])
			}
		}
	}
}

// Bad full host calls are errors naming the argument, before anything is
// allocated; the gate's parameters are refused without GateInKernel (they
// would be ignored, and g taken as the log-gate) and required with it.
func TestFullHostLayoutErrors(t *testing.T) {
	for _, c := range []struct {
		arg  string
		edit func(h *HostFullArgs)
	}{
		{"a_log", func(h *HostFullArgs) { h.ALog = nil }},
		{"dt_bias", func(h *HostFullArgs) { h.DtBias = nil }},
		{"a_log", func(h *HostFullArgs) { h.ALog = append(h.ALog, 1) }},
		{"dt_bias", func(h *HostFullArgs) { h.DtBias = h.DtBias[:1] }},
		{"a_log", func(h *HostFullArgs) { h.GateInKernel, h.DtBias = false, nil }},
		{"dt_bias", func(h *HostFullArgs) { h.GateInKernel, h.ALog = false, nil }},
		{"g", func(h *HostFullArgs) { h.G = h.G[1:] }},
		{"q", func(h *HostFullArgs) { h.Q = nil }},
		{"beta", func(h *HostFullArgs) { h.Beta = append(h.Beta, 0) }},
		{"h0", func(h *HostFullArgs) { h.H0 = h.H0[:7] }},
		{"cu_seqlens", func(h *HostFullArgs) { h.CuSeqlens = []int{0, 3, 2, 5} }},
		{"Dtype", func(h *HostFullArgs) { h.Dtype = FP32 }},
		{"BetaDtype", func(h *HostFullArgs) { h.BetaDtype = FP16 }},
		{"SeqlensDtype", func(h *HostFullArgs) { h.SeqlensDtype = BF16 }},
		{"Hv", func(h *HostFullArgs) { h.Hq, h.Hv = 2, 3 }},
		{"T", func(h *HostFullArgs) { h.T = 0 }},
		{"scale", func(h *HostFullArgs) { h.Scale = float32(math.Inf(1)) }},
		{"cu_seqlens", func(h *HostFullArgs) { h.CuSeqlens, h.H0, h.FinalState = manySeqs(h.T), nil, false }},
		{"B", func(h *HostFullArgs) { h.CuSeqlens, h.B, h.T = nil, maxSeqs+1, 1 }},
	} {
		h := fullHostArgs()
		c.edit(h)
		_, err := newFullHostLayout(h)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", c.arg, err)
		}
	}
	var ae *ArgError
	if _, err := newFullHostLayout(nil); !errors.As(err, &ae) || ae.Arg != "args" {
		t.Errorf("nil args: %v", err)
	}
	// The public entry points check before they touch the device (a
	// Runtime without one here): the error is the argument's.
	rt := &Runtime{}
	bad := fullHostArgs()
	bad.ALog = nil
	if _, err := rt.ForwardFullHost(bad); !errors.As(err, &ae) || ae.Arg != "a_log" {
		t.Errorf("ForwardFullHost: %v", err)
	}
	if err := rt.ForwardFullHostInto(fullHostArgs(), nil); !errors.As(err, &ae) || ae.Arg != "res" {
		t.Errorf("ForwardFullHostInto with a nil result: %v", err)
	}
	if _, err := rt.UploadFull(bad); !errors.As(err, &ae) || ae.Arg != "a_log" {
		t.Errorf("UploadFull: %v", err)
	}
}

// The full forward's outputs must not overlap its gate parameters either.
func TestValidateFullOverlaps(t *testing.T) {
	a := fullArgs(2, 100, 2, 4)
	a.GateInKernel = true
	a.ALog = Tensor{Ptr: a.O.Ptr + 64, Bytes: 16, Dtype: FP32, Shape: []int{4}}
	a.DtBias = Tensor{Ptr: 1 << 43, Bytes: 16, Dtype: FP32, Shape: []int{4}}
	_, err := ValidateFull(a)
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg != "o" || !strings.Contains(err.Error(), "a_log") {
		t.Errorf("o over a_log: %v", err)
	}
	a.ALog.Ptr = 1 << 44
	if _, err := ValidateFull(a); err != nil {
		t.Errorf("apart: %v", err)
	}
}

// A prepared full call is validated again at every call: it keeps slices
// of its own (ownSlices, in newFullCall), so a caller that reuses its shape
// slices for other calls once this one has returned does not change what
// the entry computes.
func TestOwnSlices(t *testing.T) {
	a := varlenArgs()
	kept := *a
	kept.ownSlices()
	before, err := ValidateCore(&kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, t := range []*Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.A, &a.H0, &a.O, &a.Ht, &a.CuSeqlensDevice} {
		t.Shape[0] = 7 // the caller's next problem, in the same slices
	}
	a.CuSeqlens[1] = 9
	after, err := ValidateCore(&kept)
	if err != nil || after.String() != before.String() || kept.CuSeqlens[1] != 1000 {
		t.Errorf("kept args changed with the caller's slices: %v / %v (%v)", before, after, err)
	}
}
