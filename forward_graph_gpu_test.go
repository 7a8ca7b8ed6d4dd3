//go:build cuda

package gdn_test

import (
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// Forward through CUDA graphs: the Runtime's own replays of a repeated
// call, and calls inside a graph the caller captures.

// deviceCase uploads one recipe case to device buffers for the tests that
// call Forward directly.
type deviceCase struct {
	*gdn.DeviceCoreArgs
	args  *gdn.CoreArgs
	wantO []float64
	r     *gdn.Runtime
}

func newDeviceCase(t *testing.T, r *gdn.Runtime, s ref.Shape, seed uint64) *deviceCase {
	t.Helper()
	in, err := ref.Recipe(s, seed, ref.RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	wantO, _, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	up, err := r.UploadCore(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
		Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A), H0: f32(in.H0)})
	if err != nil {
		t.Fatal(err)
	}
	return &deviceCase{DeviceCoreArgs: up, args: up.Args, wantO: wantO, r: r}
}

func (d *deviceCase) free() { d.Free() }

func (d *deviceCase) poisonO(t *testing.T) {
	if err := tuning.Context(d.r).MemsetD16(driverPtr(d.args.O.Ptr), 0x7fff, d.args.O.Elems(), nil); err != nil {
		t.Fatal(err)
	}
}

func (d *deviceCase) readO(t *testing.T) []float32 {
	b := make([]uint16, d.args.O.Elems())
	if err := tuning.Context(d.r).CopyToHost(unsafe.Pointer(&b[0]), driverPtr(d.args.O.Ptr), 2*len(b)); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b))
	for i, v := range b {
		out[i] = dtype.BF16ToFloat32(v)
	}
	return out
}

// Repeated calls on one non-default stream go through the graph cache (the
// second call captures, later ones replay); each must give the right answer.
func TestCoreGraphReplay(t *testing.T) {
	r := testRuntime(t)
	d := newDeviceCase(t, r, ref.Shape{B: 1, T: 333, Hq: 2, Hv: 8}, 7)
	defer d.free()
	stream, err := tuning.Context(r).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	repeatOnStream(t, r, d, stream, 4)
	// A second case on other buffers after the first was cached.
	d2 := newDeviceCase(t, r, ref.Shape{B: 1, T: 333, Hq: 2, Hv: 8}, 8)
	defer d2.free()
	for call := 0; call < 3; call++ {
		d2.poisonO(t)
		if err := r.Forward(d2.args, gdn.Stream(stream.Handle())); err != nil {
			t.Fatal(err)
		}
		stream.Synchronize()
		if err := ref.Compare32(d2.readO(t), d2.wantO).Within(ref.PassO); err != nil {
			t.Fatalf("other buffers, call %d: %v", call, err)
		}
	}
}

// repeatOnStream calls Forward on d calls times on one non-default stream
// (the second call captures the Runtime's graph, later ones replay it), o
// poisoned before each, and holds each result to the reference.
func repeatOnStream(t *testing.T, r *gdn.Runtime, d *deviceCase, stream *driver.Stream, calls int) {
	t.Helper()
	for call := 0; call < calls; call++ {
		d.poisonO(t)
		if err := r.Forward(d.args, gdn.Stream(stream.Handle())); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		if err := stream.Synchronize(); err != nil {
			t.Fatal(err)
		}
		e := ref.Compare32(d.readO(t), d.wantO)
		if err := e.Within(ref.PassO); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		t.Logf("graph call=%d o %v", call, e)
	}
}

// A caller may capture Forward into a graph of its own: the Runtime's graph
// cache must stay out of the way (no nested capture) and the caller's graph
// must compute the right thing when replayed.
func TestCoreInsideCallerGraph(t *testing.T) {
	r := testRuntime(t)
	d := newDeviceCase(t, r, ref.Shape{B: 1, T: 200, Hq: 4, Hv: 8}, 11)
	defer d.free()
	stream, err := tuning.Context(r).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	for i := 0; i < 2; i++ { // the second identical call goes through the Runtime's graph cache
		if err := r.Forward(d.args, gdn.Stream(stream.Handle())); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Synchronize(); err != nil {
		t.Fatal(err)
	}
	captureAndReplay(t, r, d, stream, 3, 1) // one kernel per unsplit call
}

// captureAndReplay captures calls Forward calls of d on the caller's
// stream into the caller's own graph, checks that the graph holds
// kernelsPerCall launches per call, and replays it once (o poisoned first)
// against the reference.
func captureAndReplay(t *testing.T, r *gdn.Runtime, d *deviceCase, stream *driver.Stream, calls, kernelsPerCall int) {
	t.Helper()
	if err := stream.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < calls; i++ {
		if err := r.Forward(d.args, gdn.Stream(stream.Handle())); err != nil {
			stream.EndCapture()
			t.Fatalf("Forward %d inside the caller's capture: %v", i, err)
		}
	}
	graph, err := stream.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Destroy()
	nodes, err := graph.KernelNodes()
	if err != nil || len(nodes) != calls*kernelsPerCall {
		t.Fatalf("caller's graph has %d kernel nodes (%v), want %d", len(nodes), err, calls*kernelsPerCall)
	}
	exec, err := graph.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	d.poisonO(t)
	if err := tuning.Context(r).Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Launch(stream); err != nil {
		t.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := ref.Compare32(d.readO(t), d.wantO).Within(ref.PassO); err != nil {
		t.Fatalf("caller's graph replay: %v", err)
	}
}
