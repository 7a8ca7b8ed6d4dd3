package gdn

import (
	"errors"
	"testing"
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

// A negative Options.PrepHeads is refused before any device is touched.
func TestOpenNegativePrepHeads(t *testing.T) {
	wantOpenRefused(t, Options{PrepHeads: -4}, "Options.PrepHeads")
}

// An Options.TransferTile other than 0, 64 or 128 is refused before any
// device is touched.
func TestOpenBadTransferTile(t *testing.T) {
	for _, tile := range []int{-64, 1, 32, 96, 256} {
		wantOpenRefused(t, Options{TransferTile: tile}, "Options.TransferTile")
	}
}

// An Options.ScanColumns other than 0, 8, 16 or 32 is refused before any
// device is touched.
func TestOpenBadScanColumns(t *testing.T) {
	for _, cols := range []int{-8, 1, 4, 24, 64, 128} {
		wantOpenRefused(t, Options{ScanColumns: cols}, "Options.ScanColumns")
	}
}

// An Options.Variant that names no core-forward variant (a typo, a transfer
// pass) is refused by Open, not at the first call; every real one passes
// this check (without a GPU Open then fails for want of CUDA).
func TestOpenBadVariant(t *testing.T) {
	for _, name := range []string{"gdn_hopper_bf16_bv96", "gdn_hopper_bf16_bv64_transfer", "gdn_scan_states_c8"} {
		wantOpenRefused(t, Options{Variant: name}, "Options.Variant")
	}
	for _, name := range []string{"gdn_hopper_bf16_bv64", "gdn_hopper_fp16_bv128", "gdn_hopper_bf16_fp16qk_bv128"} {
		rt, err := Open(Options{Variant: name})
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
