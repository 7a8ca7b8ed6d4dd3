//go:build cuda

package gdn_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// sameBits fails the test unless got holds want's values bit for bit.
func sameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

// ForwardHostInto gives ForwardHost's results bit for bit, in the caller's
// arrays when they are large enough, call after call; the outputs span
// several download pieces and the inputs several upload pieces. Without a
// final state Ht comes back empty; a nil result is an argument error.
func TestForwardHostInto(t *testing.T) {
	r := testRuntime(t)
	s := ref.Shape{B: 1, T: 4200, Hq: 2, Hv: 8, CuSeqlens: []int{0, 1000, 1001, 4200}}
	h, wantO, wantHt := smallHostCase(t, s, 7)
	first, err := r.ForwardHost(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Compare32(first.O, wantO).Within(ref.PassO); err != nil {
		t.Fatalf("o: %v", err)
	}
	if err := ref.Compare32(first.Ht, wantHt).Within(ref.PassHt); err != nil {
		t.Fatalf("ht: %v", err)
	}
	o := make([]float32, len(first.O)+5)
	for i := range o {
		o[i] = float32(math.NaN())
	}
	res := &gdn.HostCoreResult{O: o}
	for call := range 3 {
		if err := r.ForwardHostInto(h, res); err != nil {
			t.Fatal(err)
		}
		if &res.O[0] != &o[0] {
			t.Fatalf("call %d: o was reallocated", call)
		}
		sameBits(t, "o", res.O, first.O)
		sameBits(t, "ht", res.Ht, first.Ht)
	}
	ht := res.Ht
	h.FinalState = false
	if err := r.ForwardHostInto(h, res); err != nil {
		t.Fatal(err)
	}
	if len(res.Ht) != 0 || cap(res.Ht) != cap(ht) {
		t.Errorf("without a final state: ht len %d cap %d, want 0 and %d", len(res.Ht), cap(res.Ht), cap(ht))
	}
	sameBits(t, "o", res.O, first.O)
	var ae *gdn.ArgError
	if err := r.ForwardHostInto(h, nil); !errors.As(err, &ae) || ae.Arg != "res" {
		t.Errorf("nil result: %v", err)
	}
}

// ForwardHost's second call of a shape takes the spare result the first
// left, with the same values; a result once returned is never written
// again (the next calls' results are other arrays, and it keeps its
// values); a shape change keeps the other shape's spare.
func TestForwardHostSpare(t *testing.T) {
	// A Runtime of its own: the shared one has seen other tests' shapes come
	// and go, after which a new shape gets its first spare only from its
	// second call (resultPool's rule against preparing spares nobody takes).
	r := splitRuntime(t, gdn.Options{})
	s := ref.Shape{B: 1, T: 300, Hq: 2, Hv: 4, CuSeqlens: []int{0, 100, 300}}
	h, _, _ := smallHostCase(t, s, 11)
	call := func() *gdn.HostCoreResult {
		t.Helper()
		res, err := r.ForwardHost(h)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call()
	keptO, keptHt := append([]float32(nil), first.O...), append([]float32(nil), first.Ht...)
	hits0, _, _ := gdn.SpareCounts(r)
	second := call()
	if hits, _, _ := gdn.SpareCounts(r); hits != hits0+1 {
		t.Fatalf("the second call took %d spares, want 1", hits-hits0)
	}
	sameBits(t, "o", second.O, keptO)
	sameBits(t, "ht", second.Ht, keptHt)
	if &second.O[0] == &first.O[0] || &second.Ht[0] == &first.Ht[0] {
		t.Fatal("the second result shares the first's arrays")
	}
	h.FinalState = false
	noHt := call()
	if noHt.Ht != nil {
		t.Errorf("without a final state: ht of %d values", len(noHt.Ht))
	}
	sameBits(t, "o without ht", noHt.O, keptO)
	h.FinalState = true
	hits1, _, _ := gdn.SpareCounts(r)
	third := call()
	if hits, _, _ := gdn.SpareCounts(r); hits != hits1+1 {
		t.Errorf("after a shape change, the first shape's call took %d spares, want 1", hits-hits1)
	}
	sameBits(t, "o", third.O, keptO)
	for _, res := range []*gdn.HostCoreResult{first, second} {
		sameBits(t, "o of an earlier result", res.O, keptO)
		sameBits(t, "ht of an earlier result", res.Ht, keptHt)
	}
}

// ForwardFullHost, the host twin of ForwardFull, against ref.Full on every
// full case, unsplit and through a split plan; ForwardFullHostInto gives
// the same bits in the caller's arrays, call after call; PlanOfFull tells
// the plan the call ran.
func TestFullHostMatchesReference(t *testing.T) {
	for _, seg := range []int{0, 2} {
		r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: seg}))
		for i, c := range fullCases() {
			t.Run(fmt.Sprintf("seg%d/%s", seg, c.name), func(t *testing.T) {
				in, fo, h := fullCaseInputs(t, c, uint64(200+i))
				res, err := r.ForwardFullHost(h)
				if err != nil {
					t.Fatal(err)
				}
				o, ht := checkFull(t, in, fo, res.O, res.Ht)
				t.Logf("fullhost o %v ht %v", o, ht)
				into := &gdn.HostCoreResult{O: make([]float32, len(res.O)+3), Ht: make([]float32, len(res.Ht))}
				o0 := &into.O[0]
				for call := range 2 {
					if err := r.ForwardFullHostInto(h, into); err != nil {
						t.Fatal(err)
					}
					if &into.O[0] != o0 {
						t.Fatalf("call %d: o was reallocated", call)
					}
					sameBits(t, fmt.Sprintf("call %d: o", call), into.O, res.O)
					sameBits(t, fmt.Sprintf("call %d: ht", call), into.Ht, res.Ht)
				}
			})
		}
	}
	// The plan of a split call says so.
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2}))
	_, _, h := fullCaseInputs(t, fullCases()[len(fullCases())-1], 1)
	up, err := r.UploadFull(h)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Free()
	pl, err := r.PlanOfFull(up.Args)
	if err != nil || !strings.Contains(pl.String(), "split=") {
		t.Errorf("PlanOfFull of a forced split: %v, %v", pl, err)
	}
}

// ForwardFullHost refuses bad arguments with an error naming them, and the
// Runtime works afterwards.
func TestFullHostBadInput(t *testing.T) {
	r := testRuntime(t)
	_, _, h := fullCaseInputs(t, fullCases()[2], 3) // the in-kernel gate
	bad := *h
	bad.DtBias = nil
	var ae *gdn.ArgError
	if _, err := r.ForwardFullHost(&bad); !errors.As(err, &ae) || ae.Arg != "dt_bias" {
		t.Errorf("GateInKernel without dt_bias: %v", err)
	}
	bad = *h
	bad.GateInKernel = false
	if _, err := r.ForwardFullHost(&bad); !errors.As(err, &ae) || ae.Arg != "a_log" {
		t.Errorf("A_log without GateInKernel: %v", err)
	}
	if _, err := r.ForwardFullHost(h); err != nil {
		t.Errorf("a good call after bad ones: %v", err)
	}
}
