package gdn

import (
	"errors"
	"testing"
)

// A negative Options.SMs is refused before any device is touched, so this
// runs with and without a GPU.
func TestOpenNegativeSMs(t *testing.T) {
	for _, sms := range []int{-1, -8, -1 << 40} {
		rt, err := Open(Options{SMs: sms})
		if err == nil {
			rt.Close()
			t.Fatalf("SMs %d: Open succeeded", sms)
		}
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != "Options.SMs" {
			t.Errorf("SMs %d: got %v, want an *ArgError naming Options.SMs", sms, err)
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SMs %d: %v does not wrap ErrInvalidArgument", sms, err)
		}
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
	rt, err := Open(Options{PrepHeads: -4})
	if err == nil {
		rt.Close()
		t.Fatal("PrepHeads -4: Open succeeded")
	}
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg != "Options.PrepHeads" || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("PrepHeads -4: got %v, want an *ArgError naming Options.PrepHeads", err)
	}
}

// An Options.TransferTile other than 0, 64 or 128 is refused before any
// device is touched.
func TestOpenBadTransferTile(t *testing.T) {
	for _, tile := range []int{-64, 1, 32, 96, 256} {
		rt, err := Open(Options{TransferTile: tile})
		if err == nil {
			rt.Close()
			t.Fatalf("TransferTile %d: Open succeeded", tile)
		}
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != "Options.TransferTile" || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("TransferTile %d: got %v, want an *ArgError naming Options.TransferTile", tile, err)
		}
	}
}

// An Options.Variant that names no core-forward variant (a typo, a transfer
// pass) is refused by Open, not at the first call; every real one passes
// this check (without a GPU Open then fails for want of CUDA).
func TestOpenBadVariant(t *testing.T) {
	for _, name := range []string{"gdn_hopper_bf16_bv96", "gdn_hopper_bf16_bv64_transfer", "gdn_scan_states"} {
		rt, err := Open(Options{Variant: name})
		if err == nil {
			rt.Close()
			t.Fatalf("Variant %q: Open succeeded", name)
		}
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != "Options.Variant" || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Variant %q: got %v, want an *ArgError naming Options.Variant", name, err)
		}
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
