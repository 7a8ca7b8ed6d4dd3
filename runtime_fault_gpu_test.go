//go:build cuda

package gdn_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// GPU fault tests: out of memory, and many goroutines on two Runtimes.

// hogMemory allocates device memory until about leave bytes remain free and
// returns the function that frees it all again.
func hogMemory(t *testing.T, ctx *driver.Context, leave uint64) func() {
	t.Helper()
	free, _, err := ctx.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	var ptrs []driver.DevicePtr
	release := func() {
		for _, p := range ptrs {
			ctx.Free(p)
		}
		ptrs = nil
	}
	// Halve the chunk whenever it no longer fits above leave (or the
	// driver refuses it), down to 2 MB, the driver's granularity.
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
		ptrs = append(ptrs, p)
		if free, _, err = ctx.MemInfo(); err != nil {
			release()
			t.Fatal(err)
		}
	}
	t.Logf("hog: %d allocations, %d MB left free", len(ptrs), free>>20)
	return release
}

// smallHostCase is a recipe problem ready for ForwardHost, with its
// reference outputs.
func smallHostCase(t testing.TB, s ref.Shape, seed uint64) (*gdn.HostCoreArgs, []float64, []float64) {
	in, err := ref.Recipe(s, seed, ref.RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	wantO, wantHt, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	return &gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
		Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A),
		H0: f32(in.H0), FinalState: true}, wantO, wantHt
}

// ForwardHost on a GPU without room for its buffers: a clear error (the
// driver's out-of-memory code, and which allocation), every buffer it had
// allocated freed again, and the Runtime still works afterwards.
func TestForwardHostOutOfMemory(t *testing.T) {
	r := testRuntime(t)
	small, wantO, wantHt := smallHostCase(t, ref.Shape{B: 1, T: 100, Hq: 2, Hv: 4}, 77)
	if _, err := r.ForwardHost(small); err != nil { // the kernel is loaded before memory is measured
		t.Fatal(err)
	}
	release := hogMemory(t, tuning.Context(r), 256<<20)
	defer release()
	before, _, _ := tuning.Context(r).MemInfo()

	// q, k, v, g and beta take 154 MB and fit; A (134 MB more) does not.
	const T, Hq, Hv = 32768, 1, 16
	big := &gdn.HostCoreArgs{B: 1, T: T, Hq: Hq, Hv: Hv, Dtype: gdn.BF16, FinalState: true,
		Q: make([]float32, T*Hq*128), K: make([]float32, T*Hq*128), V: make([]float32, T*Hv*128),
		G: make([]float32, T*Hv), Beta: make([]float32, T*Hv), A: make([]float32, T*Hv*64)}
	_, err := r.ForwardHost(big)
	after, _, _ := tuning.Context(r).MemInfo()
	if err == nil || !driver.IsCode(err, driver.CodeOutOfMemory) || errors.Is(err, gdn.ErrInvalidArgument) {
		t.Fatalf("ForwardHost without room: %v; want the driver's out-of-memory error", err)
	}
	t.Logf("error: %v", err)
	if diff := int64(before) - int64(after); diff > 4<<20 || diff < -(4<<20) {
		t.Errorf("free device memory %d MB before the failed call, %d MB after: not all freed", before>>20, after>>20)
	}
	release()
	res, err := r.ForwardHost(small)
	if err != nil {
		t.Fatalf("after the out-of-memory error: %v", err)
	}
	if err := ref.Compare32(res.O, wantO).Within(ref.PassO); err != nil {
		t.Errorf("after the out-of-memory error, o: %v", err)
	}
	if err := ref.Compare32(res.Ht, wantHt).Within(ref.PassHt); err != nil {
		t.Errorf("after the out-of-memory error, ht: %v", err)
	}
}

// 64 goroutines on two Runtimes at once, every call checked: half through
// ForwardHost, half through Forward on device buffers and a stream of their
// own, three calls each (the second captures a graph, the third replays it).
func TestTwoRuntimes64Goroutines(t *testing.T) {
	var rts [2]*gdn.Runtime
	for i := range rts {
		r, err := gdn.Open(gdn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rts[i] = r
	}
	heads := [][2]int{{1, 1}, {1, 2}, {2, 6}, {4, 16}, {2, 8}}
	var wg sync.WaitGroup
	errs := make(chan error, 64*4)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hh := heads[g%len(heads)]
			s := ref.Shape{B: 1 + g%2, T: 1 + (37*g)%300, Hq: hh[0], Hv: hh[1]}
			r := rts[g%2]
			var err error
			if g%4 < 2 {
				err = hostCall(r, s, uint64(900+g))
			} else {
				err = deviceCalls(r, s, uint64(900+g), 3)
			}
			if err != nil {
				errs <- fmt.Errorf("goroutine %d (runtime %d, %+v): %w", g, g%2, s, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, r := range rts {
		if err := r.Close(); err != nil {
			t.Errorf("close runtime %d: %v", i, err)
		}
	}
}

// hostCall runs one recipe problem through ForwardHost and checks it.
func hostCall(r *gdn.Runtime, s ref.Shape, seed uint64) error {
	in, err := ref.Recipe(s, seed, ref.RecipeOptions{WithH0: true})
	if err != nil {
		return err
	}
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	res, err := r.ForwardHost(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, Dtype: gdn.BF16,
		Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A),
		H0: f32(in.H0), FinalState: true})
	if err != nil {
		return err
	}
	wantO, wantHt, _ := ref.Recurrent(in)
	return errors.Join(ref.Compare32(res.O, wantO).Within(ref.PassO), ref.Compare32(res.Ht, wantHt).Within(ref.PassHt))
}

// deviceCalls uploads one recipe problem and runs Forward calls times on a
// stream of its own, poisoning o before each and checking it after.
func deviceCalls(r *gdn.Runtime, s ref.Shape, seed uint64, calls int) (err error) {
	in, err := ref.Recipe(s, seed, ref.RecipeOptions{WithH0: true})
	if err != nil {
		return err
	}
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	wantO, _, _ := ref.Recurrent(in)
	ctx := tuning.Context(r)
	var ptrs []driver.DevicePtr
	defer func() {
		for _, p := range ptrs {
			ctx.Free(p)
		}
	}()
	upload := func(src unsafe.Pointer, bytes int, dt gdn.Dtype, shape ...int) gdn.Tensor {
		if err != nil {
			return gdn.Tensor{}
		}
		var p driver.DevicePtr
		if p, err = ctx.Alloc(bytes); err != nil {
			return gdn.Tensor{}
		}
		ptrs = append(ptrs, p)
		if src != nil {
			err = ctx.CopyToDevice(p, src, bytes)
		}
		return gdn.Tensor{Ptr: uintptr(p), Bytes: bytes, Dtype: dt, Shape: shape}
	}
	bf := func(x []float64, shape ...int) gdn.Tensor {
		b := make([]uint16, len(x))
		ref.RoundSliceBF16(b, x)
		return upload(unsafe.Pointer(&b[0]), 2*len(b), gdn.BF16, shape...)
	}
	fp := func(x []float64, shape ...int) gdn.Tensor {
		b := f32(x)
		return upload(unsafe.Pointer(&b[0]), 4*len(b), gdn.FP32, shape...)
	}
	a := &gdn.CoreArgs{
		Q: bf(in.Q, s.B, s.T, s.Hq, 128), K: bf(in.K, s.B, s.T, s.Hq, 128), V: bf(in.V, s.B, s.T, s.Hv, 128),
		G: fp(gcum, s.B, s.T, s.Hv), Beta: fp(in.Beta, s.B, s.T, s.Hv), A: fp(A, s.B, s.T, s.Hv, 64),
		H0: fp(in.H0, s.N(), s.Hv, 128, 128),
	}
	a.O = upload(nil, 2*s.VLen(), gdn.BF16, s.B, s.T, s.Hv, 128)
	if err != nil {
		return err
	}
	stream, err := ctx.NewStream()
	if err != nil {
		return err
	}
	defer stream.Destroy()
	// The uploads ran on the legacy stream. (Not ctx.Synchronize: it
	// fails while another goroutine's Forward captures a graph.)
	if err := ctx.WrapStream(0).Synchronize(); err != nil {
		return err
	}
	out := make([]uint16, s.VLen())
	got := make([]float32, len(out))
	for call := range calls {
		if err := ctx.MemsetD16(driver.DevicePtr(a.O.Ptr), 0x7fff, a.O.Elems(), stream); err != nil {
			return err
		}
		if err := r.Forward(a, gdn.Stream(stream.Handle())); err != nil {
			return fmt.Errorf("call %d: %w", call, err)
		}
		if err := stream.Synchronize(); err != nil {
			return fmt.Errorf("call %d: %w", call, err)
		}
		if err := ctx.CopyToHost(unsafe.Pointer(&out[0]), driver.DevicePtr(a.O.Ptr), 2*len(out)); err != nil {
			return err
		}
		for i, v := range out {
			got[i] = dtype.BF16ToFloat32(v)
		}
		if err := ref.Compare32(got, wantO).Within(ref.PassO); err != nil {
			return fmt.Errorf("call %d: %w", call, err)
		}
	}
	return nil
}
