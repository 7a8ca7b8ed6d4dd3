//go:build cuda

package main

import (
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// benchRuntime opens a Runtime (no graph cache) and a stream of it for a
// bencher, both closed when the test ends.
func benchRuntime(t *testing.T) (*gdn.Runtime, *driver.Stream) {
	t.Helper()
	rt, err := openRuntime(gdn.Options{NoGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	stream, err := tuning.Context(rt).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Destroy() })
	return rt, stream
}

// gdn bench --full on small cases (packed, with a one-token sequence; L2
// norm inside and not): the full forward is timed, planned and leaves no
// NaN or Inf, and its row carries the anchors of the case.
func TestBenchFullRunsCase(t *testing.T) {
	rt, stream := benchRuntime(t)
	for _, l2norm := range []bool{true, false} {
		b := &bencher{rt: rt, stream: stream, opts: benchOptions{reps: 3, warmup: 2, dtype: gdn.BF16, seed: 1, full: true, l2norm: l2norm}}
		for _, c := range []ref.Case{{Name: "small", Hq: 2, Hv: 4, Lens: []int{300, 1, 64}}, {Name: "tp8_2k", Hq: 2, Hv: 8, Lens: []int{2048}}} {
			r, err := b.runCase(c)
			if err != nil {
				t.Fatalf("%s (l2norm %v): %v", c.Name, l2norm, err)
			}
			if r.NonFinite != 0 || !r.Full || r.L2Norm != l2norm || r.MedianMs <= 0 || r.Plan.Kernel == "" || r.Sets != rotateSets {
				t.Errorf("%s (l2norm %v): %+v", c.Name, l2norm, r)
			}
			if c.Name == "tp8_2k" && (r.targetMs() == 0 || r.vsFLAFull() == 0) {
				t.Errorf("tp8_2k has no target or FLA full ratio: %+v", r)
			}
			t.Logf("benchfull %s l2norm=%v %.4f ms (%s/%d), plan %v", c.Name, l2norm, r.MedianMs, r.Timing, r.Calls, r.Plan)
		}
	}
}

// The fewest calls (--warmup 1 --calls 1 --reps 1, as device-run.sh's
// kerneltimes step asks) still compute every rotated input set before
// their outputs are checked: no set is left with its poisoned outputs.
func TestBenchFewestCallsComputeEverySet(t *testing.T) {
	rt, stream := benchRuntime(t)
	for _, full := range []bool{false, true} {
		b := &bencher{rt: rt, stream: stream, opts: benchOptions{reps: 1, warmup: 1, calls: 1, dtype: gdn.BF16, aDtype: gdn.FP32, seed: 3, full: full, l2norm: full}}
		r, err := b.runCase(ref.Case{Name: "small", Hq: 2, Hv: 4, Lens: []int{300, 1, 64}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Sets != rotateSets || r.Calls != 1 || r.NonFinite != 0 {
			t.Errorf("full %v: %d sets, %d calls a graph, %d NaN/Inf outputs; want %d, 1, 0", full, r.Sets, r.Calls, r.NonFinite, rotateSets)
		}
	}
}

// gdn bench on a GPU without room for a case's buffers: the case fails with
// the driver's out-of-memory error, every buffer it had allocated is freed,
// and the next case runs.
func TestBenchOutOfMemory(t *testing.T) {
	rt, stream := benchRuntime(t)
	b := &bencher{rt: rt, stream: stream, opts: benchOptions{reps: 1, warmup: 1, dtype: gdn.BF16, seed: 1}}
	small := ref.Case{Name: "small", Hq: 1, Hv: 2, Lens: []int{100, 1}}
	if r, err := b.runCase(small); err != nil || r.NonFinite != 0 {
		t.Fatalf("small case: %v, %d NaN/Inf", err, r.NonFinite)
	}

	ctx := tuning.Context(rt)
	var hog []driver.DevicePtr
	defer func() {
		for _, p := range hog {
			ctx.Free(p)
		}
	}()
	free, _, _ := ctx.MemInfo()
	const leave = 256 << 20
	for chunk := uint64(1 << 30); chunk >= 2<<20; {
		if free < leave+chunk {
			chunk /= 2
			continue
		}
		p, err := ctx.Alloc(int(chunk))
		if err != nil {
			chunk /= 2
			continue
		}
		hog = append(hog, p)
		free, _, _ = ctx.MemInfo()
	}
	before, _, _ := ctx.MemInfo()
	// One input set and outputs of about 440 MB (32768 tokens, 16 value heads).
	_, err := b.runCase(ref.Case{Name: "too_big", Hq: 2, Hv: 16, Lens: []int{32768}})
	after, _, _ := ctx.MemInfo()
	if !driver.IsCode(err, driver.CodeOutOfMemory) {
		t.Fatalf("bench case without room: %v; want the driver's out-of-memory error", err)
	}
	t.Logf("error: %v", err)
	if diff := int64(before) - int64(after); diff > 4<<20 || diff < -(4<<20) {
		t.Errorf("free device memory %d MB before the failed case, %d MB after: not all freed", before>>20, after>>20)
	}
	for _, p := range hog {
		ctx.Free(p)
	}
	hog = nil
	if r, err := b.runCase(small); err != nil || r.NonFinite != 0 {
		t.Errorf("small case after the out-of-memory error: %v, %d NaN/Inf", err, r.NonFinite)
	}
}
