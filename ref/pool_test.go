package ref

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
)

// firstDiff returns the first index where a and b differ in their bits
// (or in length: the shorter length), or -1 where they are the same.
func firstDiff(a, b []float64) int {
	for i := range min(len(a), len(b)) {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// span returns tokens [lo, hi) of in's flat token axis as the inputs of one
// sequence of its own (B = 1, no cu_seqlens), starting from h0 (a [K,V]
// state per value head, or nil).
func span(in Inputs, lo, hi int, h0 []float64) Inputs {
	s := in.Shape
	return Inputs{
		Shape: Shape{B: 1, T: hi - lo, Hq: s.Hq, Hv: s.Hv},
		Q:     in.Q[lo*s.Hq*D : hi*s.Hq*D], K: in.K[lo*s.Hq*D : hi*s.Hq*D],
		V: in.V[lo*s.Hv*D : hi*s.Hv*D],
		G: in.G[lo*s.Hv : hi*s.Hv], Beta: in.Beta[lo*s.Hv : hi*s.Hv],
		H0: h0, Scale: in.Scale,
	}
}

// slotStates returns the Hv states of slot i of a pool, as [K,V].
func slotStates(t *testing.T, pool []float64, hv, i int, l StateLayout) []float64 {
	t.Helper()
	x, err := ConvertStates(pool[i*hv*D*D:][:hv*D*D], l, LayoutKV)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// testPool returns a pool of numSlots slots of hv heads, N(0,1) states
// (the recipe's h0), stored in layout l.
func testPool(t *testing.T, numSlots, hv int, seed uint64, l StateLayout) []float64 {
	t.Helper()
	in, err := Recipe(Shape{B: numSlots, T: 1, Hq: 1, Hv: hv}, seed, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := ConvertStates(in.H0, LayoutKV, l)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// poolCase is a pooled call on recipe inputs: three packed sequences (one
// of them empty) in a pool of five slots, one sequence starting fresh.
func poolCase(t *testing.T, l StateLayout) (in Inputs, pool []float64, slots []int) {
	t.Helper()
	s, err := PackedShape(1, 2, 5, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if in, err = Recipe(s, 4, RecipeOptions{}); err != nil {
		t.Fatal(err)
	}
	return in, testPool(t, 5, 2, 3, l), []int{4, 1, -1}
}

// A pooled call is the recurrence from each sequence's slot (or zero),
// its final states written to its slot and nothing else written.
func TestPoolRecurrentMatchesRecurrent(t *testing.T) {
	for _, l := range []StateLayout{LayoutKV, LayoutVK} {
		t.Run(l.String(), func(t *testing.T) {
			in, pool, slots := poolCase(t, l)
			before := append([]float64(nil), pool...)
			res, err := PoolRecurrent(in, pool, slots, PoolOptions{Layout: l})
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(pool, before); i >= 0 {
				t.Fatalf("the argument pool was written at %d", i)
			}
			s, hv := in.Shape, in.Shape.Hv
			h0 := make([]float64, s.StateLen())
			for n, slot := range slots {
				if slot >= 0 {
					copy(h0[n*hv*D*D:], slotStates(t, pool, hv, slot, l))
				}
			}
			dense := in
			dense.H0 = h0
			wantO, wantHt, err := Recurrent(dense)
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(res.O, wantO); i >= 0 {
				t.Errorf("o differs from Recurrent at %d", i)
			}
			for n, slot := range slots {
				if slot < 0 {
					continue
				}
				if i := firstDiff(slotStates(t, res.Pool, hv, slot, l), wantHt[n*hv*D*D:][:hv*D*D]); i >= 0 {
					t.Errorf("slot %d (sequence %d) differs from ht at %d", slot, n, i)
				}
			}
			// Slots 0, 2 and 3 are named by no sequence: the same bits.
			for _, slot := range []int{0, 2, 3} {
				if i := firstDiff(res.Pool[slot*hv*D*D:][:hv*D*D], pool[slot*hv*D*D:][:hv*D*D]); i >= 0 {
					t.Errorf("unnamed slot %d changed at %d", slot, i)
				}
			}
			// Sequence 2 (slot -1) starts from zero: its o is its own
			// recurrence without h0.
			se := s.Seqs()[2]
			o2, _, err := Recurrent(span(in, se[0], se[1], nil))
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(res.O[se[0]*hv*D:se[1]*hv*D], o2); i >= 0 {
				t.Errorf("the fresh sequence's o differs from a zero start at %d", i)
			}
			if res.Checkpoints != nil || res.TokenStates != nil {
				t.Error("checkpoints or token states returned without being asked for")
			}
		})
	}
}

// The [V,K] call on the transposed pool gives the same o and the exact
// transposes of the [K,V] call's states: pool, checkpoints, token states.
func TestPoolLayoutsTranspose(t *testing.T) {
	s, err := PackedShape(1, 2, 130, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Recipe(s, 8, RecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := testPool(t, 4, 2, 9, LayoutKV)
	slots := []int{2, -1, 0}
	opts := PoolOptions{CheckpointEvery: 64, TokenStates: true}
	kv, err := PoolRecurrent(in, pool, slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	poolVK, _ := TransposeStates(pool)
	opts.Layout = LayoutVK
	vk, err := PoolRecurrent(in, poolVK, slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(vk.O, kv.O); i >= 0 {
		t.Errorf("o differs between layouts at %d", i)
	}
	for _, c := range []struct {
		name   string
		kv, vk []float64
	}{{"pool", kv.Pool, vk.Pool}, {"checkpoints", kv.Checkpoints, vk.Checkpoints}, {"token states", kv.TokenStates, vk.TokenStates}} {
		tr, err := TransposeStates(c.kv)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.kv) == 0 {
			t.Errorf("%s: empty", c.name)
		}
		if i := firstDiff(c.vk, tr); i >= 0 {
			t.Errorf("%s: [V,K] is not the transpose of [K,V] at %d", c.name, i)
		}
	}
}

// A bf16 pool: each written state is the fp32 call's rounded to bf16 once;
// o and the unnamed slots are unchanged.
func TestPoolBF16(t *testing.T) {
	in, pool, slots := poolCase(t, LayoutKV)
	opts := PoolOptions{TokenStates: true}
	f32, err := PoolRecurrent(in, pool, slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	pool16 := QuantizeBF16(pool)
	f32from16, err := PoolRecurrent(in, pool16, slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.StateDtype = dtype.BF16
	b16, err := PoolRecurrent(in, pool16, slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(b16.O, f32from16.O); i >= 0 {
		t.Errorf("o depends on the pool's dtype at %d", i)
	}
	if i := firstDiff(b16.Pool, QuantizeBF16(f32from16.Pool)); i >= 0 {
		t.Errorf("the bf16 pool is not the fp32 one rounded at %d", i)
	}
	if i := firstDiff(b16.TokenStates, QuantizeBF16(f32from16.TokenStates)); i >= 0 {
		t.Errorf("bf16 token states are not the fp32 ones rounded at %d", i)
	}
	if firstDiff(b16.Pool, f32from16.Pool) < 0 {
		t.Error("rounding to bf16 changed nothing")
	}
	if firstDiff(f32.O, f32from16.O) < 0 {
		t.Error("o does not depend on the start states")
	}
	hv := in.Shape.Hv
	if i := firstDiff(b16.Pool[3*hv*D*D:][:hv*D*D], pool16[3*hv*D*D:][:hv*D*D]); i >= 0 {
		t.Errorf("unnamed slot 3 changed at %d", i)
	}
}

// Every malformed pooled, decode or checkpoint call is an ErrShape naming
// its argument, and writes none of its arguments.
func TestServingBadInput(t *testing.T) {
	in, pool, slots := poolCase(t, LayoutKV)
	dec, err := DecodeRecipe(Shape{B: 2, T: 8, Hq: 1, Hv: 2}, 5, DecodeRecipeOptions{PoolSlots: 3})
	if err != nil {
		t.Fatal(err)
	}
	nine, err := Recipe(Shape{B: 2, T: 9, Hq: 1, Hv: 2}, 6, RecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gap, _ := PackedShape(1, 2, 3, 0, 13)
	poolCopy, decPool := append([]float64(nil), pool...), append([]float64(nil), dec.Pool...)
	pooled := func(x Inputs, p []float64, sl []int, o PoolOptions) func() error {
		return func() error { _, err := PoolRecurrent(x, p, sl, o); return err }
	}
	decode := func(x Inputs, o PoolOptions) func() error {
		sl := slices.Repeat([]int{-1}, max(x.Shape.N(), 0))
		copy(sl, dec.Slots)
		return func() error { _, err := Decode(x, dec.Pool, sl, o); return err }
	}
	withH0, shortV := in, in
	withH0.H0 = make([]float64, in.Shape.StateLen())
	shortV.V = in.V[1:]
	for _, tc := range []struct {
		name string
		call func() error
		want string // the argument the message must name
	}{
		{"slot past the pool", pooled(in, pool, []int{4, 5, -1}, PoolOptions{}), "slots"},
		{"two writers of a slot", pooled(in, pool, []int{4, 1, 4}, PoolOptions{}), "slots"},
		{"slot table too short", pooled(in, pool, []int{4, 1}, PoolOptions{}), "slots"},
		{"pool not whole slots", pooled(in, pool[D:], slots, PoolOptions{}), "pool"},
		{"pool of Hv 1", pooled(in, pool[:3*D*D], slots, PoolOptions{}), "pool"},
		{"empty pool", pooled(in, nil, []int{-1, -1, -1}, PoolOptions{}), "pool"},
		{"h0 beside a pool", pooled(withH0, pool, slots, PoolOptions{}), "h0"},
		{"checkpoint every 32", pooled(in, pool, slots, PoolOptions{CheckpointEvery: 32}), "checkpoint_every"},
		{"checkpoint every 100", pooled(in, pool, slots, PoolOptions{CheckpointEvery: 100}), "checkpoint_every"},
		{"checkpoint every -64", pooled(in, pool, slots, PoolOptions{CheckpointEvery: -64}), "checkpoint_every"},
		{"layout", pooled(in, pool, slots, PoolOptions{Layout: 2}), "state_layout"},
		{"fp16 pool", pooled(in, pool, slots, PoolOptions{StateDtype: dtype.FP16}), "pool dtype"},
		{"neg_eigval without logits", pooled(in, pool, slots, PoolOptions{Full: FullOptions{NegEigval: true}}), "neg_eigval"},
		{"a_log of 1 head", pooled(in, pool, slots, PoolOptions{Full: FullOptions{ALog: []float64{0}, DtBias: []float64{0}}}), "a_log"},
		{"short v", pooled(shortV, pool, slots, PoolOptions{}), "v:"},
		{"decode of 9 tokens", decode(nine, PoolOptions{}), "T:"},
		{"decode of an empty sequence", decode(Inputs{Shape: gap}, PoolOptions{}), "cu_seqlens"},
		{"decode with checkpoints", decode(dec.Inputs, PoolOptions{CheckpointEvery: 64}), "checkpoint_every"},
		{"checkpoints every 0", func() error { _, err := Checkpoints(in, 0); return err }, "checkpoint_every"},
		{"checkpoint starts every 65", func() error { _, err := CheckpointStarts(in.Shape, 65); return err }, "checkpoint_every"},
	} {
		err := tc.call()
		if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrShape naming %q", tc.name, err, tc.want)
		}
	}
	if firstDiff(pool, poolCopy) >= 0 || firstDiff(dec.Pool, decPool) >= 0 {
		t.Error("a failed call wrote its pool")
	}
}
