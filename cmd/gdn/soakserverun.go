package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/ref"
)

// serveRun is one serving problem's host data: what the reference takes
// (float64, every value already representable in the dtype it travels in)
// and the device buffers of the call.
type serveRun struct {
	p     serveProblem
	s     ref.Shape
	in    ref.Inputs
	pool  []float64
	slots []int
	opts  ref.PoolOptions
	bufs  []*gdn.Buffer
}

func (r *serveRun) free() {
	for _, b := range r.bufs {
		_ = b.Free()
	}
}

// newServeRun draws problem p's inputs, pool and slot table.
func newServeRun(p serveProblem) *serveRun {
	s := p.shape()
	rng := rand.New(rand.NewPCG(p.Seed, 7))
	round := func(dt gdn.Dtype, x []float64) []float64 {
		out, _ := ref.Quantize(dt, x)
		return out
	}
	normals := func(n int, f func(float64) float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = f(rng.NormFloat64())
		}
		return x
	}
	id := func(x float64) float64 { return x }
	r := &serveRun{p: p, s: s}
	r.in = ref.Inputs{Shape: s}
	r.in.Q, r.in.K = normals(s.QKLen(), id), normals(s.QKLen(), id)
	if !p.L2Norm {
		r.in.Q, _ = ref.L2Normalize(r.in.Q)
		r.in.K, _ = ref.L2Normalize(r.in.K)
	}
	r.in.Q, r.in.K, r.in.V = round(p.Dtype, r.in.Q), round(p.Dtype, r.in.K), round(p.Dtype, normals(s.VLen(), id))
	gate := func(x float64) float64 { return ref.LogSigmoid(x) / 16 }
	if p.Gate {
		gate = id
	}
	beta := ref.Sigmoid
	if p.Logits {
		beta = id
	}
	r.in.G, r.in.Beta = ref.QuantizeF32(normals(s.GateLen(), gate)), ref.QuantizeF32(normals(s.GateLen(), beta))
	r.opts = ref.PoolOptions{Full: ref.FullOptions{L2Norm: p.L2Norm, BetaLogits: p.Logits, NegEigval: p.NegEig}, CheckpointEvery: p.Ckpt, TokenStates: p.States}
	if p.Gate {
		aLog, dtBias := soakGateParams(p.Hv)
		r.opts.Full.ALog, r.opts.Full.DtBias = widen64f(aLog), widen64f(dtBias)
	}
	if p.VK {
		r.opts.Layout = ref.LayoutVK
	}
	pd := p.poolDtype()
	r.pool = round(pd, normals(p.Slots*p.Hv*ref.D*ref.D, id))
	perm := rng.Perm(p.Slots)
	r.slots = perm[:len(p.Lens)]
	for i := range r.slots {
		if p.Fresh > 0 && i%p.Fresh == p.Fresh-1 {
			r.slots[i] = -1
		}
	}
	// Slots the table does not name hold a NaN: they must come back
	// bit for bit, NaN included.
	named := map[int]bool{}
	for _, x := range r.slots {
		named[x] = true
	}
	for x := range p.Slots {
		if !named[x] {
			r.pool[x*p.Hv*ref.D*ref.D+rng.IntN(p.Hv*ref.D*ref.D)] = math.NaN()
		}
	}
	return r
}

func (p serveProblem) poolDtype() gdn.Dtype {
	if p.BF16 {
		return gdn.BF16
	}
	return gdn.FP32
}

// deviceBytes is x in dt's bytes (little-endian); x holds dt's values.
func deviceBytes(dt gdn.Dtype, x []float64) []byte {
	out := make([]byte, len(x)*dt.Size())
	for i, v := range x {
		switch dt {
		case gdn.BF16:
			binary.LittleEndian.PutUint16(out[2*i:], dtype.RoundBF16(float32(v)))
		case gdn.FP16:
			binary.LittleEndian.PutUint16(out[2*i:], dtype.RoundFP16(float32(v)))
		case gdn.Int32:
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(v)))
		default:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(v)))
		}
	}
	return out
}

// hostValues widens dt's bytes to float64.
func hostValues(dt gdn.Dtype, b []byte) []float64 {
	out := make([]float64, len(b)/dt.Size())
	for i := range out {
		switch dt {
		case gdn.BF16:
			out[i] = float64(dtype.BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
		case gdn.FP16:
			out[i] = float64(dtype.FP16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
		default:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return out
}

// tensor uploads x (values of dt) into a new buffer described as dt of
// the shape given; poison fills it with NaN instead.
func (r *serveRun) tensor(rt *gdn.Runtime, dt gdn.Dtype, x []float64, poison bool, shape ...int) (gdn.Tensor, *gdn.Buffer, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if poison {
		x = make([]float64, n)
		for i := range x {
			x[i] = math.NaN()
		}
	}
	if n == 0 {
		return gdn.Tensor{Dtype: dt, Shape: shape}, nil, nil
	}
	b, err := rt.Alloc(n * dt.Size())
	if err != nil {
		return gdn.Tensor{}, nil, err
	}
	r.bufs = append(r.bufs, b)
	return b.Tensor(dt, shape...), b, b.Write(0, deviceBytes(dt, x))
}

// read returns buffer b's values of dt.
func read(b *gdn.Buffer, dt gdn.Dtype) ([]float64, error) {
	raw := make([]byte, b.Bytes())
	if err := b.Read(0, raw); err != nil {
		return nil, err
	}
	return hostValues(dt, raw), nil
}

// runServeProblem runs serving problem p on rt (stream 0) and checks o, the
// pool (the named slots against the reference, the others bit for bit),
// the checkpoints and the per-token states.
func runServeProblem(rt *gdn.Runtime, p serveProblem, lim soakLimits) (soakOutcome, error) {
	r := newServeRun(p)
	defer r.free()
	s, hq, hv, d := r.s, p.Hq, p.Hv, ref.D
	tok, n := s.Tokens(), s.N()
	var out soakOutcome
	var err error
	var q, k, v, g, beta, o, aLog, dtBias, cu, slotsT, poolT, extra gdn.Tensor
	var oBuf, poolBuf, extraBuf *gdn.Buffer
	up := func(dst *gdn.Tensor, dt gdn.Dtype, x []float64, poison bool, shape ...int) *gdn.Buffer {
		if err != nil {
			return nil
		}
		var b *gdn.Buffer
		*dst, b, err = r.tensor(rt, dt, x, poison, shape...)
		return b
	}
	up(&q, p.Dtype, r.in.Q, false, 1, tok, hq, d)
	up(&k, p.Dtype, r.in.K, false, 1, tok, hq, d)
	up(&v, p.Dtype, r.in.V, false, 1, tok, hv, d)
	up(&g, gdn.FP32, r.in.G, false, 1, tok, hv)
	up(&beta, gdn.FP32, r.in.Beta, false, 1, tok, hv)
	oBuf = up(&o, p.Dtype, nil, true, 1, tok, hv, d)
	up(&cu, gdn.Int32, ints64(s.CuSeqlens), false, n+1)
	up(&slotsT, gdn.Int32, ints64(r.slots), false, n)
	poolBuf = up(&poolT, p.poolDtype(), r.pool, false, p.Slots, hv, d, d)
	if p.Gate {
		up(&aLog, gdn.FP32, r.opts.Full.ALog, false, hv)
		up(&dtBias, gdn.FP32, r.opts.Full.DtBias, false, hv)
	}
	rows := 0
	switch {
	case p.keepsCheckpoints() && p.Ckpt > 0:
		starts, _ := ref.CheckpointStarts(s, p.Ckpt)
		rows = starts[len(starts)-1]
	case p.Kind == serveDecode && p.States:
		rows = tok
	}
	if rows > 0 {
		extraBuf = up(&extra, p.poolDtype(), nil, true, rows, hv, d, d)
	}
	if err != nil {
		return out, err
	}
	pool := gdn.StatePool{States: poolT, Slots: r.slots, SlotsDevice: slotsT}
	layout := gdn.StateKV
	if p.VK {
		layout = gdn.StateVK
	}
	var res ref.PoolResult
	if p.Kind != serveDecode {
		a := &gdn.FullArgs{Q: q, K: k, V: v, G: g, Beta: beta, ALog: aLog, DtBias: dtBias, O: o, CuSeqlens: s.CuSeqlens,
			CuSeqlensDevice: cu, Pool: pool, Layout: layout, L2Norm: p.L2Norm, GateInKernel: p.Gate, BetaLogits: p.Logits, NegEigval: p.NegEig}
		if rows > 0 {
			a.CheckpointEvery, a.Checkpoints = p.Ckpt, extra
		}
		call := rt.ForwardFull
		if p.Kind == serveMixed {
			call = rt.ForwardMixed
		}
		if err = call(a, 0); err == nil {
			res, err = ref.PoolRecurrent(r.in, r.pool, r.slots, r.opts)
		}
	} else {
		a := &gdn.DecodeArgs{Q: q, K: k, V: v, G: g, Beta: beta, ALog: aLog, DtBias: dtBias, O: o, CuSeqlens: s.CuSeqlens,
			CuSeqlensDevice: cu, Pool: pool, Layout: layout, L2Norm: p.L2Norm, GateInKernel: p.Gate, BetaLogits: p.Logits, NegEigval: p.NegEig}
		if rows > 0 {
			a.TokenStates = extra
		}
		if err = rt.Decode(a, 0); err == nil {
			res, err = ref.Decode(r.in, r.pool, r.slots, r.opts)
		}
	}
	if err != nil {
		return out, err
	}
	gotO, err := read(oBuf, p.Dtype)
	if err != nil {
		return out, err
	}
	out.O = ref.Compare64(gotO, res.O)
	out.Pairs, out.TokenHeads = n*hv, tok*hv
	var why []error
	if e := out.O.Within(lim.O); e != nil {
		why = append(why, fmt.Errorf("o: %w", e))
	}
	rawPool := make([]byte, poolBuf.Bytes())
	if err := poolBuf.Read(0, rawPool); err != nil {
		return out, err
	}
	gotPool, wrote := hostValues(p.poolDtype(), rawPool), deviceBytes(p.poolDtype(), r.pool)
	per := hv * d * d
	perBytes := per * p.poolDtype().Size()
	var gotNamed, wantNamed []float64
	for x := range p.Slots {
		got, want := gotPool[x*per:][:per], res.Pool[x*per:][:per]
		if !slices.Contains(r.slots, x) {
			if !bytes.Equal(rawPool[x*perBytes:][:perBytes], wrote[x*perBytes:][:perBytes]) {
				why = append(why, fmt.Errorf("pool slot %d, which the table does not name, changed", x))
			}
			continue
		}
		gotNamed, wantNamed = append(gotNamed, got...), append(wantNamed, want...)
	}
	out.Ht = ref.Compare64(gotNamed, wantNamed)
	stateLine := lim.Ht
	if p.Kind == serveDecode {
		stateLine = ref.Tolerance{Ratio: lim.Ht.Ratio, MaxAbs: 1e-4}
	}
	check := func(name string, got, want []float64) {
		if p.BF16 {
			if e := withinBF16(got, want, stateLine.MaxAbs); e != nil {
				why = append(why, fmt.Errorf("%s: %w", name, e))
			}
			return
		}
		e := ref.Compare64(got, want)
		out.Ht = worseErrors(out.Ht, e)
		if e := e.Within(stateLine); e != nil {
			why = append(why, fmt.Errorf("%s: %w", name, e))
		}
	}
	check("pool's named slots", gotNamed, wantNamed)
	if rows > 0 {
		got, err := read(extraBuf, p.poolDtype())
		if err != nil {
			return out, err
		}
		want := res.Checkpoints
		if p.Kind == serveDecode {
			want = res.TokenStates
		}
		name := "checkpoints"
		if !p.keepsCheckpoints() {
			name = "token_states"
		}
		check(name, got, want)
	}
	out.Err = errors.Join(why...)
	return out, nil
}

// withinBF16 holds bf16 states to SPEC's line: each element within half a
// bf16 unit in the last place of the float64 value before rounding (want:
// the reference keeps its states unrounded), plus the call's own error d.
func withinBF16(got, want []float64, d float64) error {
	for i := range got {
		if diff := math.Abs(got[i] - want[i]); !(diff <= math.Abs(want[i])/256+d) {
			return fmt.Errorf("element %d: %v, reference %v: want within 2^-8 |ref| + %g", i, got[i], want[i], d)
		}
	}
	return nil
}

func ints64(x []int) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func worseErrors(a, b ref.Errors) ref.Errors {
	a.Ratio, a.MaxAbs, a.NaN = max(a.Ratio, b.Ratio), max(a.MaxAbs, b.MaxAbs), a.NaN+b.NaN
	return a
}

// runSoakServe runs serving problem k on the planner's Runtime and records
// its outcome as runSoakProblem does.
func runSoakServe(rts *soakRuntimes, o soakOptions, k int, p soakProblem, st *soakStats, start time.Time) soakResult {
	var res soakResult
	ran := "serve:" + p.Serve.Kind
	rt, release, err := rts.get("", 0, 0, 0)
	if err == nil {
		defer release()
		res.soakOutcome, err = runServeProblem(rt, *p.Serve, o.limits)
		if err != nil {
			if !errors.Is(err, gdn.ErrInvalidArgument) {
				res.launchErr = err
			}
		} else {
			err = res.Err
		}
	}
	st.record(k, p, ran, res.soakOutcome, err, time.Since(start), o.failLine(k, p, ran, err))
	return res
}
