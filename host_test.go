package gdn

import (
	"errors"
	"strings"
	"testing"
)

// ForwardHost names the bad field before it touches the device (a zero
// Runtime has none).
func TestForwardHostRejectsBeforeTheDevice(t *testing.T) {
	good := func() *HostCoreArgs {
		return &HostCoreArgs{B: 1, T: 2, Hq: 1, Hv: 2, Dtype: BF16,
			Q: make([]float32, 256), K: make([]float32, 256), V: make([]float32, 512),
			G: make([]float32, 4), Beta: make([]float32, 4), A: make([]float32, 256)}
	}
	cases := []struct {
		arg    string
		mutate func(h *HostCoreArgs)
	}{
		{"Hv", func(h *HostCoreArgs) { h.Hv = 3; h.Hq = 2 }},
		{"T", func(h *HostCoreArgs) { h.T = 0 }},
		{"Dtype", func(h *HostCoreArgs) { h.Dtype = FP32 }},
		{"BetaDtype", func(h *HostCoreArgs) { h.BetaDtype = Int32 }},
		{"ADtype", func(h *HostCoreArgs) { h.ADtype = FP16 }},
		{"SeqlensDtype", func(h *HostCoreArgs) { h.SeqlensDtype = FP32 }},
		{"cu_seqlens", func(h *HostCoreArgs) { h.CuSeqlens = []int{0, 3} }},
		{"v", func(h *HostCoreArgs) { h.V = h.V[:511] }},
		{"h0", func(h *HostCoreArgs) { h.H0 = make([]float32, 5) }},
	}
	for _, c := range cases {
		h := good()
		c.mutate(h)
		_, err := (&Runtime{}).ForwardHost(h)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("%s: got %v, want an ArgError naming %q", c.arg, err, c.arg)
		}
	}
	if _, err := (&Runtime{}).ForwardHost(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil args: %v", err)
	}
}

// The full forward's host entry points check too before they touch the
// device: the error is the argument's.
func TestForwardFullHostRejectsBeforeTheDevice(t *testing.T) {
	good := func() *HostFullArgs {
		return &HostFullArgs{B: 1, T: 2, Hq: 1, Hv: 2, Dtype: BF16, GateInKernel: true,
			Q: make([]float32, 256), K: make([]float32, 256), V: make([]float32, 512),
			G: make([]float32, 4), Beta: make([]float32, 4), ALog: make([]float32, 2), DtBias: make([]float32, 2)}
	}
	rt := &Runtime{}
	bad := good()
	bad.ALog = nil
	var ae *ArgError
	if _, err := rt.ForwardFullHost(bad); !errors.As(err, &ae) || ae.Arg != "a_log" {
		t.Errorf("ForwardFullHost: %v", err)
	}
	neg := good()
	neg.NegEigval = true
	if _, err := rt.ForwardFullHost(neg); !errors.As(err, &ae) || ae.Arg != "neg_eigval" {
		t.Errorf("ForwardFullHost, NegEigval without BetaLogits: %v", err)
	}
	if err := rt.ForwardFullHostInto(good(), nil); !errors.As(err, &ae) || ae.Arg != "res" {
		t.Errorf("ForwardFullHostInto with a nil result: %v", err)
	}
	if err := rt.ForwardHostInto(&HostCoreArgs{}, nil); !errors.As(err, &ae) || ae.Arg != "res" {
		t.Errorf("ForwardHostInto with a nil result: %v", err)
	}
	if _, err := rt.UploadFull(bad); !errors.As(err, &ae) || ae.Arg != "a_log" {
		t.Errorf("UploadFull: %v", err)
	}
	if _, err := rt.UploadCore(nil); !errors.As(err, &ae) || ae.Arg != "args" {
		t.Errorf("UploadCore(nil): %v", err)
	}
}

// A valid host call gets as far as the device's memory, and says what it
// could not do there once (the context here is nil).
func TestForwardHostReachesTheDevice(t *testing.T) {
	rt, rec := openRecorded()
	h := &HostCoreArgs{B: 1, T: 2, Hq: 1, Hv: 2, Dtype: BF16,
		Q: make([]float32, 256), K: make([]float32, 256), V: make([]float32, 512),
		G: make([]float32, 4), Beta: make([]float32, 4), A: make([]float32, 256)}
	_, errNew := rt.ForwardHost(h)
	errInto := rt.ForwardHostInto(h, &HostCoreResult{})
	_, errUp := rt.UploadCore(h)
	for name, err := range map[string]error{"ForwardHost": errNew, "ForwardHostInto": errInto, "UploadCore": errUp} {
		if err == nil || !strings.HasPrefix(err.Error(), "gdn: allocate ") || strings.Count(err.Error(), "gdn: ") != 1 {
			t.Errorf("%s on a nil context: %v", name, err)
		}
	}
	if rec.calls != 0 {
		t.Errorf("%d calls reached the device without their inputs", rec.calls)
	}
}
