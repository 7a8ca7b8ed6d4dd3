package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/ref"
)

// config is a serving run: the layer's heads, the pool, the requests and
// the scheduler's budgets.
type config struct {
	Hq, Hv      int
	Slots       int // the state pool's slots: at most this many requests at once
	Requests    int
	PromptMin   int // prompt lengths are drawn uniformly from [PromptMin, PromptMax]
	PromptMax   int
	DecodeSteps int // tokens decoded per request after its prompt
	Arrivals    int // requests arriving per step
	Chunk       int // prompt tokens of one request per prefill call
	StepTokens  int // prompt tokens of all requests per prefill call
	Checked     int // requests checked against float64 at the end of their life
	KeyHeads    []int
	Seed        uint64
}

// G is the value heads per query/key head.
func (c config) G() int { return c.Hv / c.Hq }

// request is one sequence's life: admitted to a slot, its prompt prefilled
// in chunks continuing from the slot, then decoded a token a step.
type request struct {
	id, slot int
	prompt   int // prompt length
	done     int // tokens run so far (prompt and decoded)
	checked  bool
}

func (r *request) prefilling() bool { return r.done < r.prompt }

// batch is one call's tokens, packed: sequence i of the call is request
// reqs[i], its tokens are rows cu[i] to cu[i+1] of the token arrays.
type batch struct {
	reqs       []*request
	cu         []int
	slots      []int
	q, k, v    []float32 // [tokens, Hq|Hv, 128], values already bf16
	a, beta    []float32 // [tokens, Hv]: the gate's raw input, beta
	firstToken []int     // the request's position of the call's first token
}

func (b *batch) tokens() int { return b.cu[len(b.cu)-1] }

// backend runs the calls: gdn on a GPU, or package ref on the CPU.
type backend interface {
	clearSlot(slot int) error
	prefill(b *batch) error // ForwardFull from and into the pool
	decode(b *batch) error  // Decode, one token a sequence
	// slotState is the slot's states [Hv, 128, 128] ([K,V]).
	slotState(slot int) ([]float32, error)
	// lastO is row i of the last call's o [Hv*128].
	lastO(i int) ([]float32, error)
	// deviceMs is the device time of the calls so far: prefill, decode.
	deviceMs() (prefill, decode float64)
}

// layer is the layer's own parameters: the gate's A_log and dt_bias per
// value head, drawn as Qwen3-Next initialises them.
type layer struct{ aLog, dtBias []float32 }

func newLayer(c config) layer {
	r := rand.New(rand.NewPCG(c.Seed, 1))
	l := layer{aLog: make([]float32, c.Hv), dtBias: make([]float32, c.Hv)}
	for h := range c.Hv {
		l.aLog[h] = float32(math.Log(1 + 15*r.Float64()))
		dt := math.Exp(math.Log(1e-3) + r.Float64()*math.Log(100))
		l.dtBias[h] = float32(dt + math.Log(-math.Expm1(-dt)))
	}
	return l
}

// token is one token's inputs as the layer's projections would give them:
// q and k not normalised, v, the gate's raw input a, beta.
type token struct{ q, k, v, a, beta []float32 }

// drawToken returns request id's token at position pos: the same values
// every time, so that a check can replay a request's whole history.
func drawToken(c config, id, pos int) token {
	r := rand.New(rand.NewPCG(c.Seed+uint64(id)<<20, uint64(pos)))
	bf := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = dtype.BF16ToFloat32(dtype.RoundBF16(float32(r.NormFloat64())))
		}
		return x
	}
	t := token{q: bf(c.Hq * ref.D), k: bf(c.Hq * ref.D), v: bf(c.Hv * ref.D), a: make([]float32, c.Hv), beta: make([]float32, c.Hv)}
	for h := range c.Hv {
		t.a[h] = float32(r.NormFloat64())
		t.beta[h] = float32(ref.Sigmoid(r.NormFloat64()))
	}
	return t
}

// add appends count tokens of r, from its position r.done on, to b,
// drawn on all cores (a step's 8,192 prompt tokens are 68 M draws).
func (b *batch) add(c config, r *request, count int) {
	if b.cu == nil {
		b.cu = []int{0}
	}
	b.reqs = append(b.reqs, r)
	b.slots = append(b.slots, r.slot)
	b.firstToken = append(b.firstToken, r.done)
	base := b.tokens()
	qk, vd := c.Hq*ref.D, c.Hv*ref.D
	b.q, b.k = slices.Grow(b.q, count*qk)[:(base+count)*qk], slices.Grow(b.k, count*qk)[:(base+count)*qk]
	b.v = slices.Grow(b.v, count*vd)[:(base+count)*vd]
	b.a, b.beta = slices.Grow(b.a, count*c.Hv)[:(base+count)*c.Hv], slices.Grow(b.beta, count*c.Hv)[:(base+count)*c.Hv]
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < count; i += workers {
				t, at := drawToken(c, r.id, r.done+i), base+i
				copy(b.q[at*qk:], t.q)
				copy(b.k[at*qk:], t.k)
				copy(b.v[at*vd:], t.v)
				copy(b.a[at*c.Hv:], t.a)
				copy(b.beta[at*c.Hv:], t.beta)
			}
		}()
	}
	wg.Wait()
	b.cu = append(b.cu, base+count)
}

// stats are what a run measured.
type stats struct {
	steps, prefillCalls, decodeCalls int
	prefillTokens, decodeTokens      int
	checked                          int
	worstO, worstState               ref.Errors
	wall                             time.Duration
}

// serve runs the requests of c to the end through be and checks c.Checked
// of them against the float64 recurrence over their whole history.
func serve(c config, be backend, log func(format string, args ...any)) (stats, error) {
	var st stats
	start := time.Now()
	lay := newLayer(c)
	r := rand.New(rand.NewPCG(c.Seed, 2))
	var pending, active []*request
	// Every stride-th request is checked, spread over the run.
	stride := max(1, c.Requests/max(1, c.Checked))
	for id := range c.Requests {
		p := c.PromptMin + r.IntN(c.PromptMax-c.PromptMin+1)
		pending = append(pending, &request{id: id, prompt: p, slot: -1, checked: id%stride == 0 && id/stride < c.Checked})
	}
	free := make([]int, 0, c.Slots)
	for s := c.Slots - 1; s >= 0; s-- {
		free = append(free, s)
	}
	arrived := 0
	for st.steps = 0; arrived < len(pending) || len(active) > 0; st.steps++ {
		arrived = min(len(pending), arrived+c.Arrivals)
		// Admit arrived requests while slots are free; a fresh slot starts
		// from the zero state.
		for i := range arrived {
			q := pending[i]
			if q.slot >= 0 || q.done > 0 || len(free) == 0 {
				continue
			}
			q.slot, free = free[len(free)-1], free[:len(free)-1]
			if err := be.clearSlot(q.slot); err != nil {
				return st, err
			}
			active = append(active, q)
		}
		// One prefill call: prompt chunks of the requests still in their
		// prompt, in arrival order, within the step's token budget.
		var pre batch
		budget := c.StepTokens
		for _, q := range active {
			if n := min(c.Chunk, q.prompt-q.done, budget); q.prefilling() && n > 0 {
				pre.add(c, q, n)
				budget -= n
			}
		}
		// One decode call: a token for every request past its prompt
		// (those whose prompt ended in an earlier step).
		var dec batch
		for _, q := range active {
			if !q.prefilling() && q.done < q.prompt+c.DecodeSteps {
				dec.add(c, q, 1)
			}
		}
		if len(pre.reqs) > 0 {
			if err := be.prefill(&pre); err != nil {
				return st, fmt.Errorf("step %d: prefill: %w", st.steps, err)
			}
			st.prefillCalls++
			st.prefillTokens += pre.tokens()
			for i, q := range pre.reqs {
				q.done += pre.cu[i+1] - pre.cu[i]
			}
		}
		if len(dec.reqs) > 0 {
			if err := be.decode(&dec); err != nil {
				return st, fmt.Errorf("step %d: decode: %w", st.steps, err)
			}
			st.decodeCalls++
			st.decodeTokens += len(dec.reqs)
			for i, q := range dec.reqs {
				q.done++
				if q.done < q.prompt+c.DecodeSteps {
					continue
				}
				if q.checked {
					if err := check(c, lay, be, q, i, &st); err != nil {
						return st, err
					}
				}
			}
		}
		// Retire finished requests and free their slots.
		kept := active[:0]
		for _, q := range active {
			if q.done >= q.prompt+c.DecodeSteps {
				free = append(free, q.slot)
				continue
			}
			kept = append(kept, q)
		}
		active = kept
		if st.steps%50 == 0 {
			log("step %d: %d active, %d waiting, %d prompt tokens and %d decode tokens so far", st.steps, len(active),
				arrived-countAdmitted(pending[:arrived]), st.prefillTokens, st.decodeTokens)
		}
	}
	st.wall = time.Since(start)
	return st, nil
}

func countAdmitted(rs []*request) int {
	n := 0
	for _, r := range rs {
		if r.slot >= 0 {
			n++
		}
	}
	return n
}

// check compares request q's slot and its last o (row i of the decode call
// that ended it) with the float64 recurrence over its whole history, on
// the value heads of c.KeyHeads (a value head depends on no other head).
func check(c config, lay layer, be backend, q *request, row int, st *stats) error {
	state, err := be.slotState(q.slot)
	if err != nil {
		return err
	}
	o, err := be.lastO(row)
	if err != nil {
		return err
	}
	g, L := c.G(), q.done
	for _, kh := range c.KeyHeads {
		in := ref.Inputs{Shape: ref.Shape{B: 1, T: L, Hq: 1, Hv: g}}
		opts := ref.FullOptions{L2Norm: true}
		for h := kh * g; h < (kh+1)*g; h++ {
			opts.ALog = append(opts.ALog, float64(lay.aLog[h]))
			opts.DtBias = append(opts.DtBias, float64(lay.dtBias[h]))
		}
		for pos := range L {
			t := drawToken(c, q.id, pos)
			in.Q = appendF64(in.Q, t.q[kh*ref.D:(kh+1)*ref.D])
			in.K = appendF64(in.K, t.k[kh*ref.D:(kh+1)*ref.D])
			in.V = appendF64(in.V, t.v[kh*g*ref.D:(kh+1)*g*ref.D])
			in.G = appendF64(in.G, t.a[kh*g:(kh+1)*g])
			in.Beta = appendF64(in.Beta, t.beta[kh*g:(kh+1)*g])
		}
		wantO, wantState, err := ref.Full(in, opts)
		if err != nil {
			return err
		}
		gotState := state[kh*g*ref.D*ref.D : (kh+1)*g*ref.D*ref.D]
		es := ref.Compare32(gotState, wantState)
		eo := ref.Compare32(o[kh*g*ref.D:(kh+1)*g*ref.D], wantO[(L-1)*g*ref.D:])
		if err := es.Within(ref.PassHt); err != nil {
			return fmt.Errorf("request %d (%d tokens), value heads %d-%d: final state: %w", q.id, L, kh*g, (kh+1)*g-1, err)
		}
		if err := eo.Within(ref.PassO); err != nil {
			return fmt.Errorf("request %d (%d tokens), value heads %d-%d: last o: %w", q.id, L, kh*g, (kh+1)*g-1, err)
		}
		st.worstState, st.worstO = worse(st.worstState, es), worse(st.worstO, eo)
	}
	st.checked++
	return nil
}

func appendF64(dst []float64, src []float32) []float64 {
	for _, x := range src {
		dst = append(dst, float64(x))
	}
	return dst
}

func worse(a, b ref.Errors) ref.Errors {
	if b.Ratio > a.Ratio {
		return b
	}
	return a
}
