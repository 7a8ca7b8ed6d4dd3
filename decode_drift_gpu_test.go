//go:build cuda

package gdn_test

import (
	"math"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// decodeDriftSteps is docs/SPEC.md's count of one-token decode calls that
// continue a prefilled slot.
const decodeDriftSteps = 4096

// The 4,096-step line of docs/SPEC.md: a slot prefilled by the full
// forward and read back, then 4,096 decode calls of one token each; the
// slot after the last is held to the float64 recurrence over the 4,096
// tokens from the state read back (ref.PassDecodeState), and every call's
// o to the decode o line against the same run. One sequence, two value
// heads; fp16 inputs, whose o rounding sits well inside the o line for
// every one of the 4,096 small calls (256 values each).
func TestDecodeDrift4096(t *testing.T) {
	r := testRuntime(t)
	const hq, hv = 1, 2
	// The prefill.
	pre, err := ref.Recipe(ref.Shape{B: 1, T: 512, Hq: hq, Hv: hv}, 4601, ref.RecipeOptions{Dtype: gdn.FP16})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.ForwardFullHost(&gdn.HostFullArgs{B: 1, T: 512, Hq: hq, Hv: hv, Dtype: gdn.FP16, Q: f32(pre.Q), K: f32(pre.K),
		V: f32(pre.V), G: f32(pre.G), Beta: f32(pre.Beta), FinalState: true})
	if err != nil {
		t.Fatal(err)
	}
	start := make([]float64, len(res.Ht))
	for i, x := range res.Ht {
		start[i] = float64(x)
	}

	// The decode tokens, one call each, read from views of one upload.
	s := ref.Shape{B: 1, T: decodeDriftSteps, Hq: hq, Hv: hv}
	in, err := ref.Recipe(s, 4602, ref.RecipeOptions{Dtype: gdn.FP16})
	if err != nil {
		t.Fatal(err)
	}
	m := newDevMem(t, r)
	q := m.tensor(gdn.FP16, in.Q, 1, s.T, hq, 128)
	k := m.tensor(gdn.FP16, in.K, 1, s.T, hq, 128)
	v := m.tensor(gdn.FP16, in.V, 1, s.T, hv, 128)
	g := m.tensor(gdn.FP32, in.G, 1, s.T, hv)
	beta := m.tensor(gdn.FP32, in.Beta, 1, s.T, hv)
	o := m.poisoned(gdn.FP16, 1, s.T, hv, 128)
	per := hv * 128 * 128
	pool := make([]float64, 3*per)
	for i := range per {
		pool[i], pool[2*per+i] = decodePattern(i), decodePattern(i+7)
	}
	copy(pool[per:], start)
	states := m.tensor(gdn.FP32, pool, 3, hv, 128, 128)
	poolIn := m.bits(states)
	a := gdn.DecodeArgs{Pool: gdn.StatePool{States: states, Slots: []int{1}, SlotsDevice: m.ints(gdn.Int32, []int{1})}}
	view := func(x gdn.Tensor, step int) gdn.Tensor {
		row := x.Bytes / s.T
		shape := append([]int{1, 1}, x.Shape[2:]...)
		return gdn.Tensor{Ptr: x.Ptr + uintptr(step*row), Bytes: row, Dtype: x.Dtype, Shape: shape}
	}
	for step := range decodeDriftSteps {
		a.Q, a.K, a.V, a.G, a.Beta, a.O = view(q, step), view(k, step), view(v, step), view(g, step), view(beta, step), view(o, step)
		if err := r.Decode(&a, 0); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}

	in.H0 = start
	wantO, wantHt, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	after := m.bits(states)
	es := ref.Compare64(valuesOf(gdn.FP32, after[per:2*per]), wantHt)
	if err := es.Within(ref.PassDecodeState); err != nil {
		t.Errorf("slot after %d steps: %v", decodeDriftSteps, err)
	}
	for i := range per {
		if after[i] != poolIn[i] || after[2*per+i] != poolIn[2*per+i] {
			t.Fatalf("an unnamed slot changed at %d", i)
		}
	}
	gotO := valuesOf(gdn.FP16, m.bits(o))
	rowLen := hv * 128
	var worst ref.Errors
	for step := range decodeDriftSteps {
		e := ref.Compare64(gotO[step*rowLen:(step+1)*rowLen], wantO[step*rowLen:(step+1)*rowLen])
		if err := e.Within(ref.PassDecodeO); err != nil {
			t.Fatalf("o of step %d: %v", step, err)
		}
		worst.Ratio, worst.MaxAbs = math.Max(worst.Ratio, e.Ratio), math.Max(worst.MaxAbs, e.MaxAbs)
	}
	t.Logf("after %d steps: slot %v; worst step's o ratio %.3g max %.3g", decodeDriftSteps, es, worst.Ratio, worst.MaxAbs)
}
