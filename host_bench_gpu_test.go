//go:build cuda

package gdn_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
)

// benchBatch is the batch of examples/prefill: four packed sequences, 7,896
// tokens, Hq 16, Hv 32, bf16, with h0 and the final state.
func benchBatch() *gdn.HostCoreArgs {
	lens := []int{4096, 1000, 2500, 300}
	cu := []int{0}
	for _, l := range lens {
		cu = append(cu, cu[len(cu)-1]+l)
	}
	T, hq, hv, n := cu[len(cu)-1], 16, 32, len(lens)
	h := &gdn.HostCoreArgs{B: 1, T: T, Hq: hq, Hv: hv, CuSeqlens: cu, Dtype: gdn.BF16, FinalState: true,
		Q: make([]float32, T*hq*128), K: make([]float32, T*hq*128), V: make([]float32, T*hv*128),
		G: make([]float32, T*hv), Beta: make([]float32, T*hv), A: make([]float32, T*hv*64),
		H0: make([]float32, n*hv*128*128)}
	// Values of the recipe's scale; timing does not depend on them, but
	// they keep the outputs finite.
	for i := range h.Q {
		h.Q[i], h.K[i] = float32(i%17-8)/100, float32(i%13-6)/80
	}
	for i := range h.V {
		h.V[i] = float32(i%23-11) / 10
	}
	for s := range lens {
		for t := cu[s]; t < cu[s+1]; t++ {
			pos := (t - cu[s]) % 64
			for hd := range hv {
				h.G[t*hv+hd] = -0.01 * float32(pos+1) // chunk-local cumulative sum
				h.Beta[t*hv+hd] = 0.5
				h.A[(t*hv+hd)*64+pos] = 1 // identity rows: A's unit diagonal
			}
		}
	}
	for i := range h.H0 {
		h.H0[i] = float32(i%29-14) / 10
	}
	return h
}

// hostBytes returns the bytes a core call moves each way in its device
// encoding: inputs to the device, outputs back.
func hostBytes(h *gdn.HostCoreArgs) (in, out int) {
	tok, n := h.B*h.T, len(h.CuSeqlens)-1
	state := n * h.Hv * 128 * 128 * 4
	in = tok*h.Hq*128*2*2 + tok*h.Hv*128*2 + tok*h.Hv*4*2 + tok*h.Hv*64*4 + state + (n+1)*4
	out = tok*h.Hv*128*2 + state
	return in, out
}

// BenchmarkForwardHost times a repeated call on the batch of
// examples/prefill, three ways: ForwardHost back to back (a new result
// every call; the spare result each call leaves for the next is prepared
// while the next call runs), ForwardHostGap (the same with the timer
// stopped between calls until the spare is ready: a caller that does other
// work between calls; spare-ms is the time the preparation took after a
// call returned) and ForwardHostInto (the same result slices every call).
// Each reports beside its ms/call the PCIe copies of the same bytes alone
// (pinned host memory, one transfer each way: pcie-ms) and the kernel
// alone (Forward on device buffers: kernel-ms); x-pcie is ms/call over
// pcie-ms, the figure to keep under 3, and faults/call the minor page
// faults during a call (its own, and those of spares prepared meanwhile:
// about 33,500 for a result of 137 MB on memory new from the OS, next to
// none on reused memory). The ForwardHost cases also report the share of
// calls that took a spare (spare/call) and that found one not ready yet,
// and joined its preparation (waited/call). Run on the GPU machine:
//
//	go test -tags cuda -run '^$' -bench ForwardHost -benchtime 20x .
func BenchmarkForwardHost(b *testing.B) {
	rt, err := gdn.Open(gdn.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	h := benchBatch()
	in, out := hostBytes(h)

	pcie := pcieMs(b, rt, in, out)
	kernel := kernelMs(b, rt, h)

	res := &gdn.HostCoreResult{}
	fresh := func() error { _, err := rt.ForwardHost(h); return err }
	for _, c := range []struct {
		name  string
		call  func() error
		spare bool // ForwardHost: count spares taken
		gap   bool // stop the timer between calls until the spare is ready
	}{
		{"ForwardHost", fresh, true, false},
		{"ForwardHostGap", fresh, true, true},
		{"ForwardHostInto", func() error { return rt.ForwardHostInto(h, res) }, false, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.call(); err != nil { // compiles, allocates the staging buffers (and res)
				b.Fatal(err)
			}
			hits0, misses0, waited0 := gdn.SpareCounts(rt)
			b.SetBytes(int64(in + out))
			var prep time.Duration
			var faults int64
			for b.Loop() {
				if c.gap {
					b.StopTimer()
					start := time.Now()
					gdn.SpareCounts(rt)
					prep += time.Since(start)
					b.StartTimer()
				}
				f := gdn.MinorFaults()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				faults += gdn.MinorFaults() - f
			}
			ms := float64(b.Elapsed().Microseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(pcie, "pcie-ms")
			b.ReportMetric(kernel, "kernel-ms")
			b.ReportMetric(ms, "ms/call")
			b.ReportMetric(ms/pcie, "x-pcie")
			b.ReportMetric(float64(faults)/float64(b.N), "faults/call")
			if c.spare {
				hits, misses, waited := gdn.SpareCounts(rt)
				calls := float64(hits - hits0 + misses - misses0)
				b.ReportMetric(float64(hits-hits0)/calls, "spare/call")
				b.ReportMetric(float64(waited-waited0)/calls, "waited/call")
			}
			if c.gap {
				b.ReportMetric(float64(prep.Microseconds())/1e3/float64(b.N), "spare-ms")
			}
		})
	}
}

// pcieMs returns the median time, in milliseconds, of copying in bytes to
// the device and out bytes back, from and to pinned host memory.
func pcieMs(b *testing.B, rt *gdn.Runtime, in, out int) float64 {
	ctx := tuning.Context(rt)
	host, err := ctx.AllocHost(max(in, out))
	if err != nil {
		b.Fatal(err)
	}
	defer host.Free()
	dev, err := ctx.Alloc(max(in, out))
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Free(dev)
	times := make([]float64, 11)
	for i := range times {
		start := time.Now()
		if err := ctx.CopyToDevice(dev, host.Pointer(), in); err != nil {
			b.Fatal(err)
		}
		if err := ctx.CopyToHost(host.Pointer(), dev, out); err != nil {
			b.Fatal(err)
		}
		times[i] = float64(time.Since(start).Microseconds()) / 1e3
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// kernelMs returns the mean time of Forward on device buffers, timed with
// CUDA events over 10 calls.
func kernelMs(b *testing.B, rt *gdn.Runtime, h *gdn.HostCoreArgs) float64 {
	d, err := rt.UploadCore(h)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Free()
	if err := rt.Forward(d.Args, 0); err != nil { // compiles or loads the kernel
		b.Fatal(err)
	}
	const calls = 10
	ms, err := rt.TimeMs(0, func() error {
		for range calls {
			if err := rt.Forward(d.Args, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ms / calls
}
