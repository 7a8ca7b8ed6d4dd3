package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// Inputs and the reference check of one soak problem. Inputs are drawn in
// float32 on every core (the helpers of inputs.go) after SPEC's recipe and
// the problem's options; the float64 reference (ref.Recurrent) runs on a
// sample of (sequence, value head) pairs, each a one-head problem of its
// own, in parallel, so a 70,000-token problem stays a matter of seconds.

// soakInputs holds the host arguments of a problem (args for the core
// forward, full for the full forward) and what the reference takes: the
// raw per-token gates (the core's arguments carry the chunk-local sums
// instead; with Gate, the gate's input a), q and k as given (with L2Norm,
// before the normalisation), and with Gate the per-head gate parameters.
type soakInputs struct {
	args              *gdn.HostCoreArgs
	full              *gdn.HostFullArgs
	g                 []float32
	q, k, v, beta, h0 []float32
	scale             float32
	aLog, dtBias      []float32
}

// soakGateParams are the gate's per-head parameters of a Gate problem:
// A_log from log 0.3 to log 3.1 and dt_bias from -0.5 to 1.25, cycling
// every eight heads, so that decays from mild to strong all come up.
func soakGateParams(hv int) (aLog, dtBias []float32) {
	aLog, dtBias = make([]float32, hv), make([]float32, hv)
	for h := range hv {
		aLog[h] = float32(math.Log(0.3 + 0.4*float64(h%8)))
		dtBias[h] = float32(0.25*float64(h%8) - 0.5)
	}
	return aLog, dtBias
}

// newSoakInputs builds the host arguments of problem p. Every value is already
// representable in the dtype it travels in (q, k, v in p.Dtype; beta too
// when p.BetaIn), so ForwardHost's rounding changes nothing and the
// reference sees exactly what the kernel sees (A in bf16 aside: that
// rounding is the option under test).
func newSoakInputs(p soakProblem) soakInputs {
	s := p.shape()
	round := roundFunc(p.Dtype)
	rounded := func(x float64) float32 { return round(float32(x)) }
	q := normalRows(s.QKLen(), p.Seed, rngQ, true, round)
	k := normalRows(s.QKLen(), p.Seed, rngK, true, round)
	if p.Full && p.L2Norm {
		// 4x is exact in bf16 and fp16: the kernel gets exactly these.
		for i := range q {
			q[i] *= 4
			k[i] *= 4
		}
	}
	v := make([]float32, s.VLen())
	fillRand(len(v), p.Seed, rngV, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			v[i] = rounded(r.NormFloat64())
		}
	})
	g := make([]float32, s.GateLen())
	fillRand(len(g), p.Seed, rngG, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			x := r.NormFloat64()
			switch {
			case p.Full && p.Gate:
				g[i] = float32(x) // the gate's raw input a
			case p.Decay == decayStrong:
				g[i] = -5
			case p.Decay == decayNone || ref.ZeroGateHead(i%s.Hv):
				g[i] = 0
			default:
				g[i] = float32(ref.LogSigmoid(x) / 16)
			}
		}
	})
	beta := make([]float32, s.GateLen())
	fillRand(len(beta), p.Seed, rngBeta, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			b := float32(ref.Sigmoid(r.NormFloat64()))
			switch p.Beta {
			case "0":
				b = 0
			case "1":
				b = 1
			}
			if p.BetaIn {
				b = rounded(float64(b))
			}
			beta[i] = b
		}
	})
	var h0 []float32
	if p.H0 {
		h0 = make([]float32, s.StateLen())
		fillRand(len(h0), p.Seed, rngH0, func(r *rand.Rand, lo, hi int) {
			for i := lo; i < hi; i++ {
				h0[i] = float32(r.NormFloat64())
			}
		})
	}
	in := soakInputs{g: g, q: q, k: k, v: v, beta: beta, h0: h0}
	if p.Full {
		f := &gdn.HostFullArgs{
			B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: p.Dtype,
			Q: q, K: k, V: v, G: g, Beta: beta, H0: h0, FinalState: p.Ht, L2Norm: p.L2Norm, GateInKernel: p.Gate,
		}
		if p.Gate {
			in.aLog, in.dtBias = soakGateParams(s.Hv)
			f.ALog, f.DtBias = in.aLog, in.dtBias
		}
		if p.BetaIn {
			f.BetaDtype = p.Dtype
		}
		if p.Seq64 {
			f.SeqlensDtype = gdn.Int64
		}
		in.full = f
		return in
	}
	h := &gdn.HostCoreArgs{
		B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: p.Dtype,
		Q: q, K: k, V: v, G: g, Beta: beta, H0: h0, FinalState: p.Ht,
	}
	if p.BetaIn {
		h.BetaDtype = p.Dtype
	}
	if p.ABF16 {
		h.ADtype = gdn.BF16
	}
	if p.Seq64 {
		h.SeqlensDtype = gdn.Int64
	}
	chunks := chunkList(s)
	gcum := chunkCumsum(s, chunks, g)
	h.A = solveA(s, chunks, k, beta, gcum)
	h.G = gcum
	in.args = h
	return in
}

// soakLimits are the pass lines of the soak.
type soakLimits struct {
	O, Ht ref.Tolerance
	// MinRefRMS: below this RMS of the reference the error ratio says
	// nothing (a state decayed to ~1e-100 against a kernel's exact 0 gives
	// ratio 1) and only the max-abs line applies.
	MinRefRMS float64
}

// defaultSoakLimits are the soak's pass lines: o ratio 2e-3 with SPEC's o
// max-abs 2e-2; ht max-abs 3e-3 with SPEC's ht ratio 4e-3.
var defaultSoakLimits = soakLimits{
	O:         ref.Tolerance{Ratio: 2e-3, MaxAbs: ref.PassO.MaxAbs},
	Ht:        ref.Tolerance{Ratio: ref.PassHt.Ratio, MaxAbs: 3e-3},
	MinRefRMS: 1e-6,
}

// soakOutcome is the check of one problem.
type soakOutcome struct {
	O, Ht      ref.Errors
	Pairs      int // (sequence, value head) pairs checked against the reference
	TokenHeads int // their tokens
	Err        error
}

// pair is one (sequence, value head) of a problem.
type pair struct{ n, h int }

// samplePairs chooses the (sequence, value head) pairs to check: all of
// them when their tokens fit budget, else the first and last head of the
// first, the last, every empty and every one-token sequence, then random
// pairs (seeded by the problem) while the budget lasts. Every problem checks
// at least one pair with tokens.
func samplePairs(p soakProblem, budget int) []pair {
	seqs := p.shape().Seqs()
	total := 0
	for _, se := range seqs {
		total += (se[1] - se[0]) * p.Hv
	}
	var out []pair
	if total <= budget {
		for n := range seqs {
			for h := range p.Hv {
				out = append(out, pair{n, h})
			}
		}
		return out
	}
	seen := map[pair]bool{}
	used := 0
	add := func(pr pair, force bool) {
		l := seqs[pr.n][1] - seqs[pr.n][0]
		if seen[pr] || (!force && used+l > budget) {
			return
		}
		seen[pr] = true
		used += l
		out = append(out, pr)
	}
	for n, se := range seqs {
		if l := se[1] - se[0]; l <= 1 {
			add(pair{n, 0}, true)
			add(pair{n, p.Hv - 1}, true)
		}
	}
	longest := 0
	for n, se := range seqs {
		if se[1]-se[0] > seqs[longest][1]-seqs[longest][0] {
			longest = n
		}
	}
	add(pair{longest, p.Hv - 1}, true) // the longest chain, whatever it costs
	for _, n := range []int{0, len(seqs) - 1} {
		add(pair{n, 0}, false)
		add(pair{n, p.Hv - 1}, false)
	}
	r := rand.New(rand.NewPCG(p.Seed, 0x50a4))
	for range 4 * len(seqs) * p.Hv {
		add(pair{r.IntN(len(seqs)), r.IntN(p.Hv)}, false)
	}
	slices.SortFunc(out, func(a, b pair) int { return (a.n*p.Hv + a.h) - (b.n*p.Hv + b.h) })
	return out
}

// soakCheck compares the kernel's outputs with the float64 reference on
// the sampled pairs, and every element of o and ht with NaN/Inf.
func soakCheck(p soakProblem, in soakInputs, res *gdn.HostCoreResult, budget int, lim soakLimits) soakOutcome {
	var out soakOutcome
	if p.ABF16 || p.Full {
		// A in bf16 is a lossy input: the recurrent reference has no A and
		// sees the exact one, so the rounding of A itself (up to 2^-9 per
		// entry) shows in o and ht on top of the kernel's error. The full
		// forward stores A in fp16 and, with L2Norm, q and k normalised and
		// rounded to fp16. Such problems are held to
		// docs/SPEC.md's lines (the full forward's GPU tests use the same),
		// the rest to the tight ones.
		lim.O = ref.Tolerance{Ratio: max(lim.O.Ratio, ref.PassO.Ratio), MaxAbs: max(lim.O.MaxAbs, ref.PassO.MaxAbs)}
		lim.Ht = ref.Tolerance{Ratio: max(lim.Ht.Ratio, ref.PassHt.Ratio), MaxAbs: max(lim.Ht.MaxAbs, ref.PassHt.MaxAbs)}
	}
	s := p.shape()
	if want := s.VLen(); len(res.O) != want {
		out.Err = fmt.Errorf("o has %d values, want %d", len(res.O), want)
		return out
	}
	if p.Ht != (res.Ht != nil) || (p.Ht && len(res.Ht) != s.StateLen()) {
		out.Err = fmt.Errorf("ht has %d values with FinalState %v", len(res.Ht), p.Ht)
		return out
	}
	bad := nonFinite(res.O) + nonFinite(res.Ht)

	pairs := samplePairs(p, budget)
	seqs := s.Seqs()
	type result struct{ gotO, wantO, gotHt, wantHt []float64 }
	results := make([]result, len(pairs))
	var firstErr error
	var errMu sync.Mutex
	parallelFor(len(pairs), func(i int) {
		pr := pairs[i]
		lo, hi := seqs[pr.n][0], seqs[pr.n][1]
		o, ht, err := pairReference(p, in, pr, lo, hi)
		if err != nil {
			errMu.Lock()
			firstErr = err
			errMu.Unlock()
			return
		}
		r := &results[i]
		r.wantO = o
		for t := lo; t < hi; t++ {
			r.gotO = append(r.gotO, widen64f(res.O[(t*s.Hv+pr.h)*ref.D:][:ref.D])...)
		}
		if p.Ht {
			r.wantHt = ht
			r.gotHt = widen64f(res.Ht[(pr.n*s.Hv+pr.h)*ref.D*ref.D:][:ref.D*ref.D])
		}
	})
	if firstErr != nil {
		out.Err = firstErr
		return out
	}
	var gotO, wantO, gotHt, wantHt []float64
	for i, r := range results {
		gotO, wantO = append(gotO, r.gotO...), append(wantO, r.wantO...)
		gotHt, wantHt = append(gotHt, r.gotHt...), append(wantHt, r.wantHt...)
		out.TokenHeads += seqs[pairs[i].n][1] - seqs[pairs[i].n][0]
	}
	out.Pairs = len(pairs)
	out.O = ref.Compare64(gotO, wantO)
	var why []string
	if bad > 0 {
		why = append(why, fmt.Sprintf("%d NaN/Inf output elements", bad))
	}
	if err := within(out.O, wantO, lim.O, lim.MinRefRMS, outputQuantum(p.Dtype)); err != nil {
		why = append(why, "o: "+err.Error())
	}
	if p.Ht {
		out.Ht = ref.Compare64(gotHt, wantHt)
		if err := within(out.Ht, wantHt, lim.Ht, lim.MinRefRMS, 0); err != nil {
			why = append(why, "ht: "+err.Error())
		}
	}
	if len(why) > 0 {
		out.Err = fmt.Errorf("%s", joinWhy(why))
	}
	return out
}

// within applies a pass line, the ratio only where the reference is not
// vanishingly small (soakLimits.MinRefRMS). quantum is the output dtype's
// rounding error where its values are subnormal (outputQuantum): the ratio
// line is widened by it, relative to the reference's RMS, so that an
// output exact but for its dtype's spacing passes however small it is.
func within(e ref.Errors, want []float64, tol ref.Tolerance, minRMS, quantum float64) error {
	r := rms(want)
	if r < minRMS {
		tol.Ratio = math.Inf(1)
	} else if quantum > 0 {
		tol.Ratio += quantum / r
	}
	return e.Within(tol)
}

// outputQuantum is half the spacing of dt's subnormals. Below its smallest
// normal (2^-14, about 6.1e-5) fp16 holds values on a fixed grid of 2^-24,
// so an o of a few 1e-6 (a one-token sequence with a small beta, say)
// rounds with an error near 1% of itself even when computed exactly; bf16
// has fp32's range, where the same error is beyond any o.
func outputQuantum(dt gdn.Dtype) float64 {
	if dt == gdn.FP16 {
		return math.Ldexp(1, -25)
	}
	return 0
}

func joinWhy(why []string) string {
	s := why[0]
	for _, w := range why[1:] {
		s += "; " + w
	}
	return s
}

// pairReference runs ref.Recurrent on one sequence [lo, hi) and value head
// of p: a problem of one q/k head and one value head (with Full, after
// ref.Full's steps: q and k normalised, the gate from its raw input). An
// empty sequence gives no o and ht = h0 (or 0).
func pairReference(p soakProblem, h soakInputs, pr pair, lo, hi int) (o, ht []float64, err error) {
	hq, hv, hk := p.Hq, p.Hv, pr.h/(p.Hv/p.Hq)
	var h0 []float64
	if h.h0 != nil {
		h0 = widen64f(h.h0[(pr.n*hv+pr.h)*ref.D*ref.D:][:ref.D*ref.D])
	}
	l := hi - lo
	if l == 0 {
		if h0 == nil {
			h0 = make([]float64, ref.D*ref.D)
		}
		return nil, h0, nil
	}
	in := ref.Inputs{Shape: ref.Shape{B: 1, T: l, Hq: 1, Hv: 1}, H0: h0, Scale: float64(h.scale)}
	in.Q = make([]float64, 0, l*ref.D)
	in.K = make([]float64, 0, l*ref.D)
	in.V = make([]float64, 0, l*ref.D)
	in.G = make([]float64, l)
	in.Beta = make([]float64, l)
	for t := lo; t < hi; t++ {
		in.Q = append(in.Q, widen64f(h.q[(t*hq+hk)*ref.D:][:ref.D])...)
		in.K = append(in.K, widen64f(h.k[(t*hq+hk)*ref.D:][:ref.D])...)
		in.V = append(in.V, widen64f(h.v[(t*hv+pr.h)*ref.D:][:ref.D])...)
		in.G[t-lo] = float64(h.g[t*hv+pr.h])
		in.Beta[t-lo] = float64(h.beta[t*hv+pr.h])
	}
	if !p.Full {
		return ref.Recurrent(in)
	}
	var fo ref.FullOptions
	fo.L2Norm = p.L2Norm
	if p.Gate {
		fo.ALog, fo.DtBias = []float64{float64(h.aLog[pr.h])}, []float64{float64(h.dtBias[pr.h])}
	}
	return ref.Full(in, fo)
}

// widen64f converts float32 values to float64.
func widen64f(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// nonFinite counts NaN and Inf values.
func nonFinite(x []float32) int {
	n := 0
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			n++
		}
	}
	return n
}

// rms is the root mean square of x (0 for none).
func rms(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s / float64(len(x)))
}
