//go:build cuda

package gdn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// A mixed batch (prompt chunks and decode sequences packed on one axis,
// in any order) against ref.PoolRecurrent over the whole batch: o at the
// prefill's line for the prompts and the decode line for the decodes,
// named slots at the state lines (bf16 pools per element), unnamed slots
// bit for bit, checkpoints of the prompts; then the same call with a new
// slot table on the same buffers. The call's working buffers are allocated
// where NaN was (staleNaN): a prompt run's last chunk reads rows of the
// decode run beside it, which only a zeroed slab keeps finite.
func TestForwardMixedMatchesReference(t *testing.T) {
	r := testRuntime(t)
	cases := []struct {
		lens         []int
		hq, hv       int
		bf16, vk     bool
		every        int
		gate, logits bool
		fresh        bool
		seqlensInt64 bool
	}{
		{lens: []int{1, 1, 4, 8, 300, 1024, 65}, hq: 2, hv: 4},                        // decodes first
		{lens: []int{200, 3, 9, 130, 1, 0, 64, 2}, hq: 1, hv: 2, every: 64, vk: true}, // interleaved, an empty one, checkpoints
		{lens: []int{5, 700, 1, 1, 129}, hq: 2, hv: 2, bf16: true, gate: true, logits: true, fresh: true, seqlensInt64: true},
		{lens: []int{1, 2, 3}, hq: 1, hv: 1},            // all decode
		{lens: []int{64, 100}, hq: 1, hv: 2, every: 64}, // all prefill
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("case%d", i), func(t *testing.T) {
			cu := []int{0}
			for _, l := range c.lens {
				cu = append(cu, cu[len(cu)-1]+l)
			}
			s := ref.Shape{B: 1, T: cu[len(cu)-1], Hq: c.hq, Hv: c.hv, CuSeqlens: cu}
			in, err := ref.Recipe(s, uint64(40+i), ref.RecipeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			in.H0 = nil
			opts := ref.PoolOptions{CheckpointEvery: c.every}
			if c.vk {
				opts.Layout = ref.LayoutVK
			}
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			if c.gate {
				opts.Full.ALog, opts.Full.DtBias = make([]float64, c.hv), make([]float64, c.hv)
				for h := range c.hv {
					opts.Full.ALog[h], opts.Full.DtBias[h] = float64(float32(0.3*float64(h+1))), float64(float32(0.1*float64(h)))
				}
				for j := range in.G {
					in.G[j] = float64(float32(rng.NormFloat64()))
				}
			}
			if c.logits {
				opts.Full.BetaLogits = true
				for j := range in.Beta {
					in.Beta[j] = float64(float32(rng.NormFloat64()))
				}
			}
			poolDt := gdn.FP32
			if c.bf16 {
				poolDt = gdn.BF16
			}
			numSlots := len(c.lens) + 3
			per := c.hv * 128 * 128
			pool := make([]float64, numSlots*per)
			for j := range pool {
				pool[j] = rng.NormFloat64()
			}
			if c.bf16 {
				pool = ref.QuantizeBF16(pool)
			} else {
				pool = ref.QuantizeF32(pool)
			}
			// The last slot is never named (the tables below draw from the
			// others) and holds a NaN, which must come back bit for bit.
			pool[(numSlots-1)*per+7] = math.NaN()
			slots := rng.Perm(numSlots - 1)[:len(c.lens)]
			if c.fresh {
				slots[1] = -1
			}
			m := newDevMem(t, r)
			seqDt := gdn.Int32
			if c.seqlensInt64 {
				seqDt = gdn.Int64
			}
			tok := s.Tokens()
			a := &gdn.FullArgs{
				Q: m.tensor(gdn.BF16, in.Q, 1, tok, c.hq, 128), K: m.tensor(gdn.BF16, in.K, 1, tok, c.hq, 128),
				V: m.tensor(gdn.BF16, in.V, 1, tok, c.hv, 128), G: m.tensor(gdn.FP32, in.G, 1, tok, c.hv),
				Beta: m.tensor(gdn.FP32, in.Beta, 1, tok, c.hv), O: m.poisoned(gdn.BF16, 1, tok, c.hv, 128),
				CuSeqlens: cu, CuSeqlensDevice: m.ints(seqDt, cu), GateInKernel: c.gate, BetaLogits: c.logits,
				Pool: gdn.StatePool{States: m.tensor(poolDt, pool, numSlots, c.hv, 128, 128), Slots: slots, SlotsDevice: m.ints(gdn.Int32, slots)},
			}
			if c.vk {
				a.Layout = gdn.StateVK
			}
			if c.gate {
				a.ALog, a.DtBias = m.tensor(gdn.FP32, opts.Full.ALog, c.hv), m.tensor(gdn.FP32, opts.Full.DtBias, c.hv)
			}
			if c.every > 0 {
				starts, err := ref.CheckpointStarts(s, c.every)
				if err != nil {
					t.Fatal(err)
				}
				a.CheckpointEvery, a.Checkpoints = c.every, m.poisoned(poolDt, starts[len(starts)-1], c.hv, 128, 128)
			}
			for round := range 2 {
				if round == 1 {
					// A new table on the same buffers: the next step of a server.
					slots = rng.Perm(numSlots - 1)[:len(c.lens)]
					a.Pool.Slots = slots
					m.upload(a.Pool.SlotsDevice.Ptr, bytesOf(gdn.Int32, intsF(slots)))
					m.poison(a.O)
					if c.every > 0 {
						m.poison(a.Checkpoints)
					}
					pool = valuesOf(poolDt, m.bits(a.Pool.States))
				}
				want, err := ref.PoolRecurrent(in, pool, slots, opts)
				if err != nil {
					t.Fatal(err)
				}
				if round == 0 {
					// The call's working buffers are allocated now: in memory
					// that held NaN, likely, as in a server that has run a while.
					m.staleNaN(256 << 20)
				}
				if err := r.ForwardMixed(a, 0); err != nil {
					t.Fatal(err)
				}
				checkMixed(t, fmt.Sprintf("round %d", round), c.lens, cu, c.hv, valuesOf(gdn.BF16, m.bits(a.O)), want.O)
				got := m.bits(a.Pool.States)
				for x := range numSlots {
					seq := -1
					for n, y := range slots {
						if x == y {
							seq = n
						}
					}
					gs := valuesOf(poolDt, got[x*per:(x+1)*per])
					if seq < 0 {
						for j, b := range got[x*per : (x+1)*per] {
							if w := bytesOf(poolDt, pool[x*per+j:x*per+j+1]); valueBits(poolDt, w) != b {
								t.Fatalf("round %d: unnamed slot %d changed at %d", round, x, j)
							}
						}
						continue
					}
					what := fmt.Sprintf("round %d slot %d (sequence %d, %d tokens)", round, x, seq, c.lens[seq])
					if ref.MaxDecodeTokens >= c.lens[seq] && c.lens[seq] > 0 {
						checkStates(t, what, gs, want.Pool[x*per:(x+1)*per], c.bf16)
					} else {
						checkPrefillStates(t, what, gs, want.Pool[x*per:(x+1)*per], c.bf16)
					}
				}
				if c.every > 0 {
					checkPrefillStates(t, fmt.Sprintf("round %d checkpoints", round), valuesOf(poolDt, m.bits(a.Checkpoints)), want.Checkpoints, c.bf16)
				}
			}
		})
	}
}

// checkMixed holds each sequence's o to its kind's line: the decode line
// for sequences of at most 8 tokens, the prefill's otherwise.
func checkMixed(t *testing.T, what string, lens, cu []int, hv int, got, want []float64) {
	t.Helper()
	for n, l := range lens {
		if l == 0 {
			continue
		}
		lo, hi := cu[n]*hv*128, cu[n+1]*hv*128
		line := ref.PassO
		if l <= ref.MaxDecodeTokens {
			line = ref.PassDecodeO
		}
		if err := ref.Compare64(got[lo:hi], want[lo:hi]).Within(line); err != nil {
			t.Errorf("%s: sequence %d (%d tokens) o: %v", what, n, l, err)
		}
	}
}

// checkPrefillStates holds a prefill's written states to SPEC's lines:
// fp32 at the ht lines, bf16 within 2^-8 |s| + 1.5e-2 of the float64
// value s before rounding.
func checkPrefillStates(t *testing.T, what string, got, want []float64, bf16 bool) {
	t.Helper()
	if !bf16 {
		if err := ref.Compare64(got, want).Within(ref.PassHt); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	for i, s := range want {
		if d := math.Abs(got[i] - s); !(d <= math.Abs(s)/256+ref.PassHt.MaxAbs) {
			t.Errorf("%s: entry %d: got %v, want %v", what, i, got[i], s)
			return
		}
	}
}

func intsF(x []int) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// valueBits is the raw bits of one encoded value (bytesOf of one element).
func valueBits(dt gdn.Dtype, b []byte) uint32 {
	if dt.Size() == 4 {
		return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	}
	return uint32(b[0]) | uint32(b[1])<<8
}
