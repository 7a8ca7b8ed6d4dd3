//go:build cuda

package gdn_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// openSlice opens a Runtime on a green-context slice of sms SMs, skipping
// the test where the driver has no green contexts; Close runs at cleanup.
func openSlice(t *testing.T, sms int) *gdn.Runtime {
	t.Helper()
	r, err := gdn.Open(gdn.Options{SMs: sms})
	if err != nil {
		t.Fatalf("Open(SMs %d): %v", sms, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if in := r.Device(); in.GreenFallback != "" {
		t.Skipf("green contexts unavailable, the Runtime runs on the whole device: %s", in.GreenFallback)
	}
	return r
}

// forwardOnStream runs d's call calls times on s (the second call captures
// a graph, later ones replay it), poisoning o before each on the same
// stream, and checks o against the float64 reference after each.
func forwardOnStream(r *gdn.Runtime, d *deviceCase, s *driver.Stream, calls int) error {
	for call := 0; call < calls; call++ {
		if err := tuning.Context(r).MemsetD16(driverPtr(d.args.O.Ptr), 0x7fff, d.args.O.Elems(), s); err != nil {
			return err
		}
		if err := r.Forward(d.args, gdn.Stream(s.Handle())); err != nil {
			return fmt.Errorf("call %d: %w", call, err)
		}
		if err := s.Synchronize(); err != nil {
			return fmt.Errorf("call %d: %w", call, err)
		}
		res, err := d.Download()
		if err != nil {
			return err
		}
		if err := ref.Compare32(res.O, d.wantO).Within(ref.PassO); err != nil {
			return fmt.Errorf("call %d: o: %w", call, err)
		}
	}
	return nil
}

// greenHostCall runs a small case through ForwardHost (the legacy default
// stream of the Runtime's context) and checks o and ht (hostCall).
func greenHostCall(r *gdn.Runtime, seed uint64) error {
	return hostCall(r, ref.Shape{B: 1, T: 90 + int(seed%7)*11, Hq: 1, Hv: 2}, seed)
}

// Runtimes on slices of 8 to 132 SMs: Device().SMs is the count obtained
// (at least the count asked, at most the device's), and Forward is right on
// the slice, on a stream of the Runtime's context (plain call, graph
// capture, graph replays) and through ForwardHost (stream 0).
func TestGreenRuntimeSlices(t *testing.T) {
	total := testRuntime(t).Device().SMs
	for i, sms := range []int{8, 16, 32, 72, 132} {
		t.Run(fmt.Sprint(sms), func(t *testing.T) {
			if sms > total {
				t.Skipf("the device has %d SMs", total)
			}
			r := openSlice(t, sms)
			in := r.Device()
			t.Logf("green_runtime asked=%d got=%d device=%d", sms, in.SMs, in.DeviceSMs)
			if !in.Green || in.SMsAsked != sms || in.DeviceSMs != total {
				t.Errorf("Device() = %+v", in)
			}
			if in.SMs < sms || in.SMs > total {
				t.Errorf("got %d SMs for %d asked (device %d)", in.SMs, sms, total)
			}
			d := newDeviceCase(t, r, ref.Shape{B: 1, T: 333, Hq: 2, Hv: 8}, uint64(700+i))
			defer d.free()
			s, err := tuning.Context(r).NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			if err := forwardOnStream(r, d, s, 4); err != nil {
				t.Fatal(err)
			}
			if err := greenHostCall(r, uint64(800+i)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// More SMs than the device has is an *ArgError naming Options.SMs.
func TestGreenRuntimeTooManySMs(t *testing.T) {
	total := testRuntime(t).Device().SMs
	for _, sms := range []int{total + 1, 1 << 40} {
		r, err := gdn.Open(gdn.Options{SMs: sms})
		if err == nil {
			r.Close()
			t.Fatalf("SMs %d: Open succeeded", sms)
		}
		var ae *gdn.ArgError
		if !errors.As(err, &ae) || ae.Arg != "Options.SMs" || !strings.Contains(err.Error(), fmt.Sprintf("has %d", total)) {
			t.Errorf("SMs %d: got %v, want an *ArgError naming Options.SMs and the device's %d", sms, err, total)
		}
	}
}

// Goroutines share green Runtimes (two slices at once): each on its own
// stream through the graph path, or through ForwardHost, all at once.
func TestGreenRuntimeConcurrent(t *testing.T) {
	rts := []*gdn.Runtime{openSlice(t, 16), openSlice(t, 32)}
	const workers = 8
	cases := make([]*deviceCase, workers)
	for w := range cases {
		cases[w] = newDeviceCase(t, rts[w%2], ref.Shape{B: 1, T: 150 + 37*w, Hq: 1 + w%2, Hv: 2 * (1 + w%2)}, uint64(900+w))
		defer cases[w].free()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := 0; w < workers; w++ {
		r := rts[w%2]
		wg.Add(2)
		go func() {
			defer wg.Done()
			s, err := tuning.Context(r).NewStream()
			if err != nil {
				errs <- err
				return
			}
			defer s.Destroy()
			if err := forwardOnStream(r, cases[w], s, 5); err != nil {
				errs <- fmt.Errorf("worker %d (%d SMs), stream: %w", w, r.Device().SMs, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := greenHostCall(r, uint64(1000+w)); err != nil {
				errs <- fmt.Errorf("worker %d (%d SMs), ForwardHost: %w", w, r.Device().SMs, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
