//go:build cuda

package gdn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/ref"
)

// decodeCase is one decode problem of the GPU tests, drawn by
// ref.DecodeRecipe and run in both layouts.
type decodeCase struct {
	name        string
	shape       ref.Shape
	opts        ref.DecodeRecipeOptions // Layout and PoolSlots are set by the run
	betaIn      bool                    // beta (or its logits) in q's dtype instead of fp32
	tokenStates bool
	seqInt64    bool
}

func packedShape(hq, hv int, lens ...int) ref.Shape {
	s, err := ref.PackedShape(hq, hv, lens...)
	if err != nil {
		panic(err)
	}
	return s
}

func decodeCases() []decodeCase {
	bf := dtype.BF16
	return []decodeCase{
		{name: "T1", shape: ref.Shape{B: 6, T: 1, Hq: 2, Hv: 4}, opts: ref.DecodeRecipeOptions{FreshEvery: 3}},
		{name: "T4", shape: ref.Shape{B: 3, T: 4, Hq: 1, Hv: 2}, tokenStates: true},
		{name: "T8", shape: ref.Shape{B: 2, T: 8, Hq: 2, Hv: 2}, tokenStates: true, opts: ref.DecodeRecipeOptions{FreshEvery: 2}},
		{name: "varlen", shape: packedShape(2, 4, 1, 8, 3, 5, 2, 7, 4, 6), tokenStates: true, opts: ref.DecodeRecipeOptions{FreshEvery: 4}},
		{name: "varlen_int64", shape: packedShape(1, 2, 8, 1, 1, 6), seqInt64: true},
		{name: "gva_G4", shape: ref.Shape{B: 3, T: 2, Hq: 2, Hv: 8}},
		{name: "l2norm", shape: ref.Shape{B: 3, T: 3, Hq: 1, Hv: 2}, opts: ref.DecodeRecipeOptions{L2Norm: true}},
		{name: "gate", shape: ref.Shape{B: 3, T: 3, Hq: 1, Hv: 4}, opts: ref.DecodeRecipeOptions{GateInKernel: true}},
		{name: "beta_logits", shape: ref.Shape{B: 3, T: 2, Hq: 1, Hv: 2}, opts: ref.DecodeRecipeOptions{BetaLogits: true}},
		{name: "neg_eigval", shape: ref.Shape{B: 3, T: 5, Hq: 1, Hv: 2}, opts: ref.DecodeRecipeOptions{BetaLogits: true, NegEigval: true}},
		{name: "all_options_varlen", shape: packedShape(2, 4, 3, 1, 8), tokenStates: true, betaIn: true,
			opts: ref.DecodeRecipeOptions{L2Norm: true, GateInKernel: true, BetaLogits: true, NegEigval: true}},
		{name: "beta_bf16", shape: ref.Shape{B: 2, T: 3, Hq: 1, Hv: 2}, betaIn: true},
		{name: "fp16", shape: ref.Shape{B: 2, T: 4, Hq: 1, Hv: 2}, betaIn: true, opts: ref.DecodeRecipeOptions{Dtype: gdn.FP16}},
		{name: "bf16_pool", shape: ref.Shape{B: 4, T: 3, Hq: 2, Hv: 4}, tokenStates: true,
			opts: ref.DecodeRecipeOptions{StateDtype: bf, FreshEvery: 3}},
		{name: "bf16_pool_varlen_options", shape: packedShape(1, 2, 2, 8, 1), tokenStates: true,
			opts: ref.DecodeRecipeOptions{StateDtype: bf, L2Norm: true, GateInKernel: true, BetaLogits: true}},
		{name: "fp16_bf16_pool", shape: ref.Shape{B: 2, T: 2, Hq: 1, Hv: 2}, opts: ref.DecodeRecipeOptions{Dtype: gdn.FP16, StateDtype: bf}},
	}
}

// decodeRun is what one decode call on the device left: o, the pool and
// the per-token states as raw bits, and the slots it wrote.
type decodeRun struct {
	o, pool, ts []uint32
	slots       []int
}

// stateDtype is the pool's dtype of a recipe's options.
func stateDtype(o ref.DecodeRecipeOptions) gdn.Dtype {
	if o.StateDtype == dtype.BF16 {
		return gdn.BF16
	}
	return gdn.FP32
}

// decodePattern fills the slots no sequence names with values that include
// NaN: they must keep their bits.
func decodePattern(i int) float64 {
	if i%97 == 5 {
		return math.NaN()
	}
	return float64(i%251)/32 - 3.5
}

// runDecodeCase draws case c in layout l, runs it on the device from a
// pool with three slots more than sequences, the unnamed ones filled with
// decodePattern, every output poisoned, and holds the results to ref.Decode:
// o to the decode line, every written state (slot, token_states) to the
// per-element line, the unnamed slots to their bits, each sequence's last
// token state to its slot's bits.
func runDecodeCase(t *testing.T, r *gdn.Runtime, c decodeCase, seed uint64, l gdn.StateLayout) decodeRun {
	t.Helper()
	s := c.shape
	n := s.N()
	opts := c.opts
	opts.Layout = ref.LayoutKV
	if l == gdn.StateVK {
		opts.Layout = ref.LayoutVK
	}
	opts.PoolSlots = n + 3
	p, err := ref.DecodeRecipe(s, seed, opts)
	if err != nil {
		t.Fatal(err)
	}
	dt := recipeDtype(ref.RecipeOptions{Dtype: opts.Dtype})
	sdt := stateDtype(opts)
	in := p.Inputs
	betaDt := gdn.FP32
	if c.betaIn {
		betaDt = dt
		if in.Beta, err = ref.Quantize(dt, in.Beta); err != nil {
			t.Fatal(err)
		}
	}
	per := s.Hv * 128 * 128
	named := map[int]bool{}
	for _, x := range p.Slots {
		if x >= 0 {
			named[x] = true
		}
	}
	for slot := range opts.PoolSlots {
		if !named[slot] {
			for i := range per {
				p.Pool[slot*per+i] = decodePattern(i)
			}
		}
	}
	po := p.Options
	po.TokenStates = c.tokenStates
	// The float64 values before a bf16 pool rounds them: the same call with
	// fp32 states (the pool's values are read as they are either way).
	exact := po
	exact.StateDtype = dtype.FP32
	want, err := ref.Decode(in, p.Pool, p.Slots, exact)
	if err != nil {
		t.Fatal(err)
	}

	m := newDevMem(t, r)
	a := uploadDecode(m, decodeInputs{shape: s, in: in, pool: p.Pool, slots: p.Slots, opts: po, dt: dt, betaDt: betaDt,
		stateDt: sdt, layout: l, tokenStates: c.tokenStates, seqInt64: c.seqInt64})
	poolIn := m.bits(a.Pool.States)
	if err := r.Decode(a, 0); err != nil {
		t.Fatal(err)
	}
	run := decodeRun{o: m.bits(a.O), pool: m.bits(a.Pool.States), slots: p.Slots}
	eo := ref.Compare64(valuesOf(dt, run.o), want.O)
	if err := eo.Within(ref.PassDecodeO); err != nil {
		t.Errorf("%v o: %v", l, err)
	}
	bf16 := sdt == gdn.BF16
	for slot := range opts.PoolSlots {
		got := run.pool[slot*per : (slot+1)*per]
		if !named[slot] {
			for i, b := range got {
				if b != poolIn[slot*per+i] {
					t.Fatalf("%v: slot %d, named by no sequence, changed at %d: %#x, was %#x", l, slot, i, b, poolIn[slot*per+i])
				}
			}
			continue
		}
		checkStates(t, fmt.Sprintf("%v slot %d", l, slot), valuesOf(sdt, got), want.Pool[slot*per:(slot+1)*per], bf16)
	}
	if c.tokenStates {
		run.ts = m.bits(a.TokenStates)
		checkStates(t, fmt.Sprintf("%v token_states", l), valuesOf(sdt, run.ts), want.TokenStates, bf16)
		for i, se := range s.Seqs() {
			if slot := p.Slots[i]; slot >= 0 {
				last := run.ts[(se[1]-1)*per : se[1]*per]
				for j, b := range last {
					if b != run.pool[slot*per+j] {
						t.Fatalf("%v: sequence %d's last token state differs from its slot at %d", l, i, j)
					}
				}
			}
		}
	}
	t.Logf("%s %v: o %v", c.name, l, eo)
	return run
}

// Every case against the float64 reference in both layouts; the [V,K] call
// gives the [K,V] call's o bit for bit and the exact transposes of its
// states.
func TestDecodeMatchesReference(t *testing.T) {
	r := testRuntime(t)
	for i, c := range decodeCases() {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(4400 + i)
			kv := runDecodeCase(t, r, c, seed, gdn.StateKV)
			vk := runDecodeCase(t, r, c, seed, gdn.StateVK)
			for j := range kv.o {
				if kv.o[j] != vk.o[j] {
					t.Fatalf("o differs between the layouts at %d: %#x [K,V], %#x [V,K]", j, kv.o[j], vk.o[j])
				}
			}
			hv := c.shape.Hv
			transposed := func(what string, a, b []uint32, rows []int) {
				for _, row := range rows {
					for h := range hv {
						base := (row*hv + h) * 128 * 128
						for k := range 128 {
							for v := range 128 {
								if a[base+k*128+v] != b[base+v*128+k] {
									t.Fatalf("%s row %d head %d: [V,K] is not the transpose of [K,V] at (%d, %d)", what, row, h, k, v)
								}
							}
						}
					}
				}
			}
			var written []int
			for _, x := range kv.slots {
				if x >= 0 {
					written = append(written, x)
				}
			}
			transposed("pool", kv.pool, vk.pool, written)
			if c.tokenStates {
				rows := make([]int, c.shape.Tokens())
				for j := range rows {
					rows[j] = j
				}
				transposed("token_states", kv.ts, vk.ts, rows)
			}
		})
	}
}

// decodeInputs is a decode call drawn on the host, for uploadDecode.
type decodeInputs struct {
	shape                 ref.Shape
	in                    ref.Inputs
	pool                  []float64
	slots                 []int
	opts                  ref.PoolOptions
	dt, betaDt, stateDt   gdn.Dtype
	layout                gdn.StateLayout
	tokenStates, seqInt64 bool
}

// uploadDecode puts a decode call on the device: its inputs, pool and slot
// table uploaded, o and token_states poisoned.
func uploadDecode(m *devMem, d decodeInputs) *gdn.DecodeArgs {
	s, in, po := d.shape, d.in, d.opts
	a := &gdn.DecodeArgs{
		Q: m.tensor(d.dt, in.Q, s.B, s.T, s.Hq, 128), K: m.tensor(d.dt, in.K, s.B, s.T, s.Hq, 128),
		V: m.tensor(d.dt, in.V, s.B, s.T, s.Hv, 128), G: m.tensor(gdn.FP32, in.G, s.B, s.T, s.Hv),
		Beta:   m.tensor(d.betaDt, in.Beta, s.B, s.T, s.Hv),
		O:      m.poisoned(d.dt, s.B, s.T, s.Hv, 128),
		Layout: d.layout, L2Norm: po.Full.L2Norm, BetaLogits: po.Full.BetaLogits, NegEigval: po.Full.NegEigval,
	}
	a.Pool = gdn.StatePool{States: m.tensor(d.stateDt, d.pool, len(d.pool)/(s.Hv*128*128), s.Hv, 128, 128), Slots: d.slots,
		SlotsDevice: m.ints(gdn.Int32, d.slots)}
	if po.Full.ALog != nil {
		a.GateInKernel = true
		a.ALog, a.DtBias = m.tensor(gdn.FP32, po.Full.ALog, s.Hv), m.tensor(gdn.FP32, po.Full.DtBias, s.Hv)
	}
	if d.tokenStates {
		a.TokenStates = m.poisoned(d.stateDt, s.Tokens(), s.Hv, 128, 128)
	}
	if s.CuSeqlens != nil {
		a.CuSeqlens = s.CuSeqlens
		a.CuSeqlensDevice = m.ints(gdn.Int32, s.CuSeqlens)
		if d.seqInt64 {
			a.CuSeqlensDevice = m.ints(gdn.Int64, s.CuSeqlens)
		}
	}
	return a
}
