//go:build cuda

package gdn_test

import (
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
)

// tinyCall uploads the smallest core call (one sequence of one chunk, one
// head, h0 and ht) so that the GPU's time per call stays below the host's
// and the launch queue never fills: what Forward's timings below measure is
// the host.
func tinyCall(tb testing.TB, rt *gdn.Runtime) *gdn.DeviceCoreArgs {
	tb.Helper()
	const T = 64
	h := &gdn.HostCoreArgs{B: 1, T: T, Hq: 1, Hv: 1, Dtype: gdn.BF16, FinalState: true,
		Q: make([]float32, T*128), K: make([]float32, T*128), V: make([]float32, T*128),
		G: make([]float32, T), Beta: make([]float32, T), A: make([]float32, T*64), H0: make([]float32, 128*128)}
	d, err := rt.UploadCore(h)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// forwardStreams are the two paths of a repeated Forward: a direct launch
// (the legacy default stream never goes through a graph) and a graph replay
// (a stream of the caller's, from the second identical call on).
func forwardStreams(tb testing.TB, rt *gdn.Runtime) (names []string, streams []gdn.Stream, done func()) {
	s, err := tuning.Context(rt).NewStream()
	if err != nil {
		tb.Fatal(err)
	}
	return []string{"direct", "graph"}, []gdn.Stream{0, gdn.Stream(s.Handle())}, func() { s.Destroy() }
}

// A repeated Forward allocates nothing in Go, whether it launches directly
// or replays its graph (the GPU side of TestForwardHostPathAllocs).
func TestForwardAllocs(t *testing.T) {
	r := testRuntime(t)
	d := tinyCall(t, r)
	defer d.Free()
	names, streams, done := forwardStreams(t, r)
	defer done()
	for i, s := range streams {
		forward := func() {
			if err := r.Forward(d.Args, s); err != nil {
				t.Fatal(err)
			}
		}
		forward() // compiles or loads the kernel, prepares the call
		forward() // captures the graph
		if allocs := testing.AllocsPerRun(50, forward); allocs != 0 {
			t.Errorf("%s: %v allocs per repeated Forward, want 0", names[i], allocs)
		}
	}
	if err := tuning.Context(r).Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGPUForward times a repeated Runtime.Forward on device buffers,
// host side: validation, the prepared call's lookup and the driver calls
// (cuLaunchKernel, or cuStreamIsCapturing and cuGraphLaunch), on the
// smallest call. BenchmarkForward is the same host path without the driver.
// On the GPU machine:
//
//	.bin/gdn.test -test.run '^$' -test.bench GPUForward -test.benchmem
func BenchmarkGPUForward(b *testing.B) {
	rt, err := gdn.Open(gdn.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	d := tinyCall(b, rt)
	defer d.Free()
	names, streams, done := forwardStreams(b, rt)
	defer done()
	for i, s := range streams {
		b.Run(names[i], func(b *testing.B) {
			for range 2 { // compile or load, prepare, capture
				if err := rt.Forward(d.Args, s); err != nil {
					b.Fatal(err)
				}
			}
			if err := tuning.Context(rt).Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := rt.Forward(d.Args, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := tuning.Context(rt).Synchronize(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
