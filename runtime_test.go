package gdn

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/tuning"
)

// wantOpenRefused opens a Runtime with o and wants it refused as a bad
// argument: an *ArgError naming arg that wraps ErrInvalidArgument.
func wantOpenRefused(t *testing.T, o Options, arg string) {
	t.Helper()
	rt, err := Open(o)
	if err == nil {
		rt.Close()
		t.Fatalf("%s in %+v: Open succeeded", arg, o)
	}
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg != arg {
		t.Errorf("%+v: got %v, want an *ArgError naming %s", o, err, arg)
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%+v: %v does not wrap ErrInvalidArgument", o, err)
	}
}

// A negative Options.SMs is refused before any device is touched, so this
// runs with and without a GPU.
func TestOpenNegativeSMs(t *testing.T) {
	for _, sms := range []int{-1, -8, -1 << 40} {
		wantOpenRefused(t, Options{SMs: sms}, "Options.SMs")
	}
}

// Without the cuda tag a positive SMs gets the usual ErrNoCUDA, not an
// argument error.
func TestOpenSMsWithoutCUDA(t *testing.T) {
	if cudaBuilt {
		t.Skip("built with -tags cuda")
	}
	_, err := Open(Options{SMs: 16})
	if !errors.Is(err, ErrNoCUDA) {
		t.Errorf("got %v, want ErrNoCUDA", err)
	}
	var ae *ArgError
	if errors.As(err, &ae) {
		t.Errorf("got an *ArgError: %v", err)
	}
}

// withKnobs is Options with the knobs of tests and benchmarks, as
// tuning.Set attaches them.
func withKnobs(k tuning.Knobs) Options {
	var o Options
	tuning.Set(&o, k)
	return o
}

// A negative PrepHeads knob is refused before any device is touched.
func TestOpenNegativePrepHeads(t *testing.T) {
	wantOpenRefused(t, withKnobs(tuning.Knobs{PrepHeads: -4}), "PrepHeads")
}

// A TransferTile knob other than 0, 64 or 128 is refused before any
// device is touched.
func TestOpenBadTransferTile(t *testing.T) {
	for _, tile := range []int{-64, 1, 32, 96, 256} {
		wantOpenRefused(t, withKnobs(tuning.Knobs{TransferTile: tile}), "TransferTile")
	}
}

// A ScanColumns knob other than 0, 8, 16 or 32 is refused before any
// device is touched.
func TestOpenBadScanColumns(t *testing.T) {
	for _, cols := range []int{-8, 1, 4, 24, 64, 128} {
		wantOpenRefused(t, withKnobs(tuning.Knobs{ScanColumns: cols}), "ScanColumns")
	}
}

// A Variant knob that names no core-forward variant (a typo, a transfer
// pass) is refused by Open, not at the first call; every real one passes
// this check (without a GPU Open then fails for want of CUDA).
func TestOpenBadVariant(t *testing.T) {
	for _, name := range []string{"gdn_hopper_bf16_bv96", "gdn_hopper_bf16_bv64_transfer", "gdn_scan_states_c8"} {
		wantOpenRefused(t, withKnobs(tuning.Knobs{Variant: name}), "Variant")
	}
	for _, name := range []string{"gdn_hopper_bf16_bv64", "gdn_hopper_fp16_bv128", "gdn_hopper_bf16_fp16qk_bv128"} {
		rt, err := Open(withKnobs(tuning.Knobs{Variant: name}))
		if err == nil {
			rt.Close()
			continue // a GPU here
		}
		var ae *ArgError
		if errors.As(err, &ae) {
			t.Errorf("Variant %q: refused as an argument: %v", name, err)
		}
	}
}

// Without the cuda build tag Open reports ErrNoCUDA (and never exits).
func TestOpenWithoutCUDA(t *testing.T) {
	if cudaBuilt {
		t.Skip("built with -tags cuda")
	}
	_, err := Open(Options{})
	if !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Open: %v, want ErrNoCUDA", err)
	}
}

// Every call on a closed Runtime, or one not made by Open, returns
// ErrClosed, and a second Close does nothing.
func TestClosedRuntime(t *testing.T) {
	rt := &Runtime{}
	if err := rt.Close(); err != nil {
		t.Errorf("Close of a closed Runtime: %v", err)
	}
	h := &HostCoreArgs{B: 1, T: 2, Hq: 1, Hv: 2, Dtype: BF16,
		Q: make([]float32, 256), K: make([]float32, 256), V: make([]float32, 512),
		G: make([]float32, 4), Beta: make([]float32, 4), A: make([]float32, 256)}
	_, errStream := rt.NewStream()
	_, errTime := rt.TimeMs(0, func() error { return nil })
	_, errPlan := rt.PlanOf(&CoreArgs{})
	_, errPlanFull := rt.PlanOfFull(&FullArgs{})
	_, errHost := rt.ForwardHost(h)
	_, errUpload := rt.UploadCore(h)
	for name, err := range map[string]error{
		"Forward":       rt.Forward(&CoreArgs{}, 0),
		"ForwardFull":   rt.ForwardFull(&FullArgs{}, 0),
		"PlanOf":        errPlan,
		"PlanOfFull":    errPlanFull,
		"ForwardHost":   errHost,
		"UploadCore":    errUpload,
		"NewStream":     errStream,
		"DestroyStream": rt.DestroyStream(0x10000),
		"TimeMs":        errTime,
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed Runtime: %v, want ErrClosed", name, err)
		}
	}
}

// Close closes the device layer once and then the context; later calls,
// and a second Close, find the Runtime closed. (The context here is nil:
// the driver's error for closing it comes back.)
func TestRuntimeClose(t *testing.T) {
	rt, rec := openRecorded()
	if err := rt.Close(); err == nil {
		t.Error("Close of a nil context: no error from the driver")
	}
	if err := rt.Close(); err != nil || rec.closed != 1 {
		t.Errorf("second Close: %v; device closed %d times, want 1", err, rec.closed)
	}
	if err := rt.Forward(&CoreArgs{}, 0); !errors.Is(err, ErrClosed) || rec.calls != 0 {
		t.Errorf("Forward after Close: %v (%d calls reached the device)", err, rec.calls)
	}
}

// Streams: NewStream's failure says what failed once; DestroyStream
// refuses a stream NewStream did not make; TimeMs runs nothing when it
// cannot record its events.
func TestRuntimeStreams(t *testing.T) {
	rt, _ := openRecorded()
	if _, err := rt.NewStream(); err == nil || !strings.HasPrefix(err.Error(), "gdn: new stream: ") || strings.Count(err.Error(), "gdn: ") != 1 {
		t.Errorf("NewStream on a nil context: %v", err)
	}
	var ae *ArgError
	if err := rt.DestroyStream(0x10000); !errors.As(err, &ae) || ae.Arg != "stream" {
		t.Errorf("DestroyStream of a foreign stream: %v", err)
	}
	ran := false
	if _, err := rt.TimeMs(0, func() error { ran = true; return nil }); err == nil || ran {
		t.Errorf("TimeMs without events: %v, region ran %v", err, ran)
	}
}
