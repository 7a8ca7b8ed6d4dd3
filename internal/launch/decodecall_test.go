package launch

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/kernsrc"
)

func decodeKeyOf(t *testing.T, a *problem.Decode) decodeKey {
	t.Helper()
	d, err := problem.ValidateDecode(a)
	if err != nil {
		t.Fatal(err)
	}
	return newDecodeKey(a, d)
}

// The slot table's contents are data: a call whose table alone changed has
// the key of the first. The pool (address, dtype, size), the table's
// address, the layout, the flags and the sequences are part of it.
func TestDecodeKey(t *testing.T) {
	base := decodeKeyOf(t, problemtest.Decode(4, 2, 2, 4))
	a := problemtest.Decode(4, 2, 2, 4)
	a.Pool.Slots = []int{7, -1, 0, 3}
	if got := decodeKeyOf(t, a); got != base {
		t.Errorf("new slots changed the key:\n%+v\n%+v", got, base)
	}
	edits := map[string]func(a *problem.Decode){
		"pool address": func(a *problem.Decode) { a.Pool.States.Ptr += 1 << 20 },
		"pool dtype":   func(a *problem.Decode) { a.Pool.States.Dtype = dtype.BF16 },
		"pool slots": func(a *problem.Decode) {
			a.Pool.States.Shape[0]--
			a.Pool.States.Bytes = a.Pool.States.Elems() * 4
		},
		"table address": func(a *problem.Decode) { a.Pool.SlotsDevice.Ptr += 256 },
		"layout":        func(a *problem.Decode) { a.Layout = problem.LayoutVK },
		"l2norm":        func(a *problem.Decode) { a.L2Norm = true },
		"beta logits":   func(a *problem.Decode) { a.BetaLogits = true },
		"neg eigval":    func(a *problem.Decode) { a.BetaLogits, a.NegEigval = true, true },
		"scale":         func(a *problem.Decode) { a.Scale = 0.5 },
		"token states": func(a *problem.Decode) {
			a.TokenStates = problem.Tensor{Ptr: 1 << 43, Bytes: 8 * 4 << 16 * 4, Dtype: dtype.FP32, Shape: []int{8, 4, 128, 128}}
		},
	}
	for name, edit := range edits {
		a := problemtest.Decode(4, 2, 2, 4)
		edit(a)
		if decodeKeyOf(t, a) == base {
			t.Errorf("%s: the key did not change", name)
		}
	}
}

// The packed parameters carry the call: every address, the sizes and the
// flags of its options; the variant follows the dtype, layout and pool.
func TestDecodeParamsAndVariant(t *testing.T) {
	a := problemtest.Decode(1, 6, 1, 2)
	a.CuSeqlens = []int{0, 1, 6}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 44, Bytes: 12, Dtype: dtype.Int32, Shape: []int{3}}
	a.Pool.Slots = []int{1, -1}
	a.Pool.SlotsDevice.Shape, a.Pool.SlotsDevice.Bytes = []int{2}, 8
	a.GateInKernel, a.BetaLogits, a.NegEigval, a.L2Norm = true, true, true, true
	a.ALog = problem.Tensor{Ptr: 1 << 45, Bytes: 8, Dtype: dtype.FP32, Shape: []int{2}}
	a.DtBias = problem.Tensor{Ptr: 1<<45 + 64, Bytes: 8, Dtype: dtype.FP32, Shape: []int{2}}
	a.Pool.States.Dtype = dtype.BF16
	a.Layout = problem.LayoutVK
	d, err := problem.ValidateDecode(a)
	if err != nil {
		t.Fatal(err)
	}
	k := newDecodeKey(a, d)
	p := decodeParams(k)
	want := kernsrc.DecodeParams{Q: a.Q.Ptr, K: a.K.Ptr, V: a.V.Ptr, G: a.G.Ptr, Beta: a.Beta.Ptr, ALog: a.ALog.Ptr,
		DtBias: a.DtBias.Ptr, Pool: a.Pool.States.Ptr, Slots: a.Pool.SlotsDevice.Ptr, O: a.O.Ptr, CuSeqlens: 1 << 44,
		Scale: d.Scale, T: 6, Hq: 1, Hv: 2, N: 2,
		Flags: kernsrc.DecodeFlagL2Norm | kernsrc.DecodeFlagGateInKernel | kernsrc.DecodeFlagBetaFP32 |
			kernsrc.DecodeFlagBetaLogits | kernsrc.DecodeFlagNegEigval | kernsrc.DecodeFlagVarlen}
	if p != want {
		t.Errorf("params\n%+v, want\n%+v", p, want)
	}
	v, err := decodeVariantOf(d, a.Layout)
	if err != nil || v.Name != "gdn_decode_bf16_vk_bf16pool" {
		t.Errorf("variant %q, %v", v.Name, err)
	}
	if _, ok := kernsrc.Lookup(v.Name); !ok {
		t.Errorf("%s is not in the catalogue", v.Name)
	}
}

// Bad input is refused before anything is prepared or launched.
func TestLauncherDecodeBadInput(t *testing.T) {
	l, _ := testLauncher(plan.Knobs{})
	a := problemtest.Decode(2, 9, 1, 1)
	err := l.Decode(*a, 0)
	var ae *gdnerr.ArgError
	if !errors.As(err, &ae) || ae.Arg != "T" || !strings.Contains(err.Error(), "1 to 8") {
		t.Errorf("T = 9: %v", err)
	}
	if _, err := l.preparedDecode(nil); err == nil {
		t.Error("nil accepted")
	}
	if n := l.DecodeCalls(); n != 0 {
		t.Errorf("%d prepared calls after bad input", n)
	}
}
