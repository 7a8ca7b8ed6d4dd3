package ref

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
)

func TestDecodeRecipe(t *testing.T) {
	s, err := PackedShape(2, 4, 1, 4, 8, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	opts := DecodeRecipeOptions{PoolSlots: 9, FreshEvery: 2}
	p, err := DecodeRecipe(s, 61, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := DecodeRecipe(s, 61, opts)
	other, _ := DecodeRecipe(s, 62, opts)
	if firstDiff(p.Pool, again.Pool) >= 0 || firstDiff(p.Inputs.V, again.Inputs.V) >= 0 || !slices.Equal(p.Slots, again.Slots) {
		t.Error("the same seed drew different problems")
	}
	if firstDiff(p.Pool, other.Pool) < 0 || firstDiff(p.Inputs.Q, other.Inputs.Q) < 0 {
		t.Error("another seed drew the same problem")
	}
	if len(p.Pool) != 9*s.Hv*D*D || p.Inputs.H0 != nil {
		t.Fatalf("pool of %d values, h0 %d: want 9 slots and no h0", len(p.Pool), len(p.Inputs.H0))
	}
	seen := map[int]bool{}
	for n, slot := range p.Slots {
		fresh := n%2 == 1
		switch {
		case fresh && slot != -1, !fresh && (slot < 0 || slot >= 9 || seen[slot]):
			t.Errorf("slots %v: entry %d", p.Slots, n)
		}
		seen[slot] = true
	}
	// What the device reads: q, k, v in bf16, g, beta and the pool in fp32.
	for name, x := range map[string][]float64{"q": p.Inputs.Q, "v": p.Inputs.V} {
		if i := firstDiff(x, QuantizeBF16(x)); i >= 0 {
			t.Errorf("%s[%d] is not a bf16 value", name, i)
		}
	}
	if i := firstDiff(p.Pool, QuantizeF32(p.Pool)); i >= 0 {
		t.Errorf("pool[%d] is not an fp32 value", i)
	}
	if o := p.Options; o.Full.L2Norm || o.Full.ALog != nil || o.Full.BetaLogits || o.Layout != LayoutKV {
		t.Errorf("plain recipe's options %+v", o)
	}
	if _, err := Decode(p.Inputs, p.Pool, p.Slots, p.Options); err != nil {
		t.Errorf("Decode of the drawn problem: %v", err)
	}
}

func TestDecodeRecipeOptions(t *testing.T) {
	s := Shape{B: 3, T: 2, Hq: 1, Hv: 2}
	base, err := DecodeRecipe(s, 71, DecodeRecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeRecipe(s, 71, DecodeRecipeOptions{Layout: LayoutVK, StateDtype: dtype.BF16,
		L2Norm: true, GateInKernel: true, BetaLogits: true, NegEigval: true, Scale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	o := p.Options
	if o.Layout != LayoutVK || o.StateDtype != dtype.BF16 || !o.Full.L2Norm || !o.Full.BetaLogits || !o.Full.NegEigval || p.Inputs.Scale != 0.5 {
		t.Errorf("options %+v, scale %v", o, p.Inputs.Scale)
	}
	// The pool: the same draws as the plain one, rounded to bf16 (from
	// float64, once) and stored transposed.
	want, _ := TransposeStates(QuantizeBF16(normals(rand.New(rand.NewPCG(71, streamPool)), len(base.Pool))))
	if i := firstDiff(p.Pool, want); i >= 0 {
		t.Errorf("the [V,K] bf16 pool is not the plain one rounded and transposed at %d", i)
	}
	// q and k are left unnormalised for the call's L2 norm.
	if n := math.Sqrt(dot(p.Inputs.Q[:D], p.Inputs.Q[:D])); math.Abs(n-1) < 0.1 {
		t.Errorf("L2Norm: q's first row has norm %v", n)
	}
	if n := math.Sqrt(dot(base.Inputs.K[:D], base.Inputs.K[:D])); math.Abs(n-1) > 0.01 {
		t.Errorf("plain: k's first row has norm %v", n)
	}
	// The gate's parameters as Qwen3-Next draws them.
	if len(o.Full.ALog) != s.Hv || len(o.Full.DtBias) != s.Hv {
		t.Fatalf("A_log %v, dt_bias %v", o.Full.ALog, o.Full.DtBias)
	}
	for h := range s.Hv {
		if a := o.Full.ALog[h]; a < 0 || a > math.Log(16)+1e-6 {
			t.Errorf("A_log[%d] = %v, outside [0, log 16]", h, a)
		}
		if dt := Softplus(o.Full.DtBias[h]); dt < 0.999e-3 || dt > 0.1001 {
			t.Errorf("softplus(dt_bias[%d]) = %v, outside [1e-3, 0.1]", h, dt)
		}
	}
	// beta holds logits of either sign.
	if slices.Min(p.Inputs.Beta) >= 0 || slices.Max(p.Inputs.Beta) <= 0 {
		t.Errorf("beta logits in [%v, %v]", slices.Min(p.Inputs.Beta), slices.Max(p.Inputs.Beta))
	}
	if _, err := Decode(p.Inputs, p.Pool, p.Slots, p.Options); err != nil {
		t.Errorf("Decode of the drawn problem: %v", err)
	}

	for _, tc := range []struct {
		name string
		s    Shape
		opts DecodeRecipeOptions
		want string
	}{
		{"T 9", Shape{B: 1, T: 9, Hq: 1, Hv: 1}, DecodeRecipeOptions{}, "T:"},
		{"pool too small", s, DecodeRecipeOptions{PoolSlots: 2}, "opts.PoolSlots"},
		{"negative FreshEvery", s, DecodeRecipeOptions{FreshEvery: -1}, "opts.FreshEvery"},
		{"NegEigval alone", s, DecodeRecipeOptions{NegEigval: true}, "opts.NegEigval"},
		{"layout", s, DecodeRecipeOptions{Layout: 7}, "state_layout"},
		{"fp16 pool", s, DecodeRecipeOptions{StateDtype: dtype.FP16}, "pool dtype"},
		{"int32 inputs", s, DecodeRecipeOptions{Dtype: dtype.Int32}, "opts.Dtype"},
	} {
		_, err := DecodeRecipe(tc.s, 1, tc.opts)
		if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrShape naming %q", tc.name, err, tc.want)
		}
	}
}
