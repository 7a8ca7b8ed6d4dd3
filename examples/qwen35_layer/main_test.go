package main

import (
	"testing"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/examples/internal/headcheck"
	"github.com/gdnjit/gdn/ref"
)

// The check of the GPU path works on slices: ref.Full of a key head's
// slice is exactly that key head's part of ref.Full of the whole layer
// (value heads depend on no other head), so a result equal to the whole
// layer's reference passes with no error at all.
func TestKeyHeadSliceIsExact(t *testing.T) {
	l, err := newLayer(4, 8, []int{70, 1, 0, 65}, 3)
	if err != nil {
		t.Fatal(err)
	}
	o, ht, err := ref.Full(l.in, l.options())
	if err != nil {
		t.Fatal(err)
	}
	whole := &gdn.HostCoreResult{O: ref.Float32s(o), Ht: ref.Float32s(ht)}
	for kh := range 4 {
		sub := l.keyHeadSlice(kh)
		so, sht, err := ref.Full(sub.in, sub.options())
		if err != nil {
			t.Fatal(err)
		}
		og, hg := headcheck.Outputs(l.in.Shape, whole, kh)
		if e := ref.Compare32(og, so); e.MaxAbs > 1e-6 || e.NaN+e.Missing > 0 {
			t.Errorf("key head %d: o of the slice differs from the whole layer's: %v", kh, e)
		}
		if e := ref.Compare32(hg, sht); e.MaxAbs > 1e-5 || e.NaN+e.Missing > 0 {
			t.Errorf("key head %d: ht of the slice differs from the whole layer's: %v", kh, e)
		}
	}
}

// The layer's call is what a serving stack makes (bf16, the gate and the L2
// norm inside, zero h0, ht returned) and its gates decay, from barely to
// strongly across the heads.
func TestLayerCall(t *testing.T) {
	l, err := newLayer(layerHq, layerHv, []int{100, 1}, layerSeed)
	if err != nil {
		t.Fatal(err)
	}
	h := l.hostArgs()
	if h.Dtype != gdn.BF16 || !h.L2Norm || !h.GateInKernel || h.H0 != nil || !h.FinalState || len(h.ALog) != layerHv {
		t.Errorf("call %+v", h)
	}
	g, err := ref.GateFromRaw(l.in.G, l.aLog, l.dtBias)
	if err != nil {
		t.Fatal(err)
	}
	first, last := 0.0, 0.0
	for i, x := range g {
		if !(x < 0) {
			t.Fatalf("g[%d] = %v, want < 0", i, x)
		}
		switch i % layerHv {
		case 0:
			first += x
		case layerHv - 1:
			last += x
		}
	}
	if !(last < 100*first) {
		t.Errorf("mean log-gate of the first head %v, of the last %v: want the last far stronger", first/101, last/101)
	}
	if _, err := newLayer(3, 4, []int{10}, 1); err == nil {
		t.Error("Hv not a multiple of Hq accepted")
	}
}

// The GPU path's reference check of the whole batch takes seconds: one key
// head's slice (two value heads over all the prompts) in well under ten.
func TestSliceReferenceTime(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if raceDetector {
		t.Skip("under the race detector the time says nothing of the reference's")
	}
	l, err := newLayer(layerHq, layerHv, promptLens, layerSeed)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sub := l.keyHeadSlice(checkedKeyHeads[1])
	if _, _, err := ref.Full(sub.in, sub.options()); err != nil {
		t.Fatal(err)
	}
	t.Logf("ref.Full of one key head's slice: %v", time.Since(start))
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("ref.Full of one slice took %v", d)
	}
}

// The no-GPU path passes.
func TestCPUReference(t *testing.T) {
	if err := cpuReference(); err != nil {
		t.Fatal(err)
	}
}
