//go:build cuda

package main

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
)

// cOf is the gdn_tensor of t (the reverse of tensor).
func cOf(t gdn.Tensor) cTensor {
	c := cTensor{Ptr: uint64(t.Ptr), Bytes: int64(t.Bytes), Dtype: int32(t.Dtype), Ndim: int32(len(t.Shape))}
	for i, d := range t.Shape {
		c.Shape[i] = int64(d)
	}
	return c
}

// fullOf is the gdn_full_args of a (no pool or checkpoints), with cu its
// host boundaries.
func fullOf(a *gdn.FullArgs, cu []int64) cFullArgs {
	c := cFullArgs{
		Q: cOf(a.Q), K: cOf(a.K), V: cOf(a.V), G: cOf(a.G), Beta: cOf(a.Beta), H0: cOf(a.H0), O: cOf(a.O), Ht: cOf(a.Ht),
		Scale: a.Scale, L2Norm: 1,
	}
	c.CuSeqlens = cSeqs{Host: &cu[0], N: int64(len(cu)), Device: cOf(a.CuSeqlensDevice)}
	return c
}

// TestForwardFullThroughABI runs a full forward through gdn_forward_full's
// body and the same call through Runtime.ForwardFull directly: the same
// bits in o and ht. Then a bad argument and a closed handle through the ABI.
func TestForwardFullThroughABI(t *testing.T) {
	h, st := openRuntime(nil)
	if st == statusNoCUDA || st == statusUnsupportedGPU {
		t.Skip(lastError(0))
	}
	if st != statusOK {
		t.Fatalf("gdn_open: %d: %s", st, lastError(0))
	}
	rt := lookup(h).rt
	r := rand.New(rand.NewPCG(1, 2))
	const T, Hq, Hv, D = 200, 2, 4, 128
	fill := func(n int, f func() float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f()
		}
		return x
	}
	normal := func() float32 { return float32(r.NormFloat64()) }
	host := &gdn.HostFullArgs{
		B: 1, T: T, Hq: Hq, Hv: Hv, Dtype: gdn.BF16, CuSeqlens: []int{0, 70, T},
		Q: fill(T*Hq*D, normal), K: fill(T*Hq*D, normal), V: fill(T*Hv*D, normal),
		G:    fill(T*Hv, func() float32 { return -float32(r.Float64()) / 8 }),
		Beta: fill(T*Hv, func() float32 { return float32(r.Float64()) }),
		H0:   fill(2*Hv*D*D, normal), FinalState: true, L2Norm: true,
	}
	direct, err := rt.UploadFull(host)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Free()
	viaABI, err := rt.UploadFull(host)
	if err != nil {
		t.Fatal(err)
	}
	defer viaABI.Free()
	c := fullOf(viaABI.Args, []int64{0, 70, T})
	if _, err := rt.TimeMs(0, func() error {
		if err := rt.ForwardFull(direct.Args, 0); err != nil {
			return err
		}
		if st := forwardFull(h, &c, 0); st != statusOK {
			t.Fatalf("gdn_forward_full: %d: %s", st, lastError(h))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want, err := direct.Download()
	if err != nil {
		t.Fatal(err)
	}
	got, err := viaABI.Download()
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2][]float32{"o": {got.O, want.O}, "ht": {got.Ht, want.Ht}} {
		if len(pair[0]) != len(pair[1]) || len(pair[0]) == 0 {
			t.Fatalf("%s: %d values through the ABI, %d direct", name, len(pair[0]), len(pair[1]))
		}
		for i := range pair[0] {
			if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
				t.Fatalf("%s[%d]: %v through the ABI, %v direct", name, i, pair[0][i], pair[1][i])
			}
		}
	}

	bad := c
	bad.Q.Shape[3] = 64
	if st := forwardFull(h, &bad, 0); st != statusInvalidArgument || !strings.HasPrefix(lastError(h), "gdn: q: ") {
		t.Errorf("q of head dimension 64: status %d, message %q", st, lastError(h))
	}
	if st := closeRuntime(h); st != statusOK {
		t.Fatalf("gdn_close: %d: %s", st, lastError(0))
	}
	if st := forwardFull(h, &c, 0); st != statusClosed {
		t.Errorf("a call after gdn_close: status %d, want %d", st, statusClosed)
	}
}
