//go:build cuda

package main

import (
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

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
