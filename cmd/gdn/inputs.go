package main

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/ref"
)

// Fast host-side inputs for the benchmark. ref.Recipe draws the same recipe
// in float64 on one goroutine, which takes minutes for the largest suite case
// (32768 tokens x 64 value heads); this file draws it in float32, in
// parallel, and precomputes what the core forward is given (g_cumsum and A)
// the same way. The draws differ from ref.Recipe's, the distribution does not.

// hostInputs is one set of core-forward inputs in the layouts of
// gdn.CoreArgs, ready to upload.
type hostInputs struct {
	Shape   ref.Shape
	Dtype   gdn.Dtype // of Q, K, V: BF16 or FP16
	Q, K, V []float32 // values of Dtype (already rounded to it), widened
	GRaw    []float32 // [B,T,Hv] per-token log-gate (kept for checks)
	G       []float32 // [B,T,Hv] chunk-local cumulative log-gate
	Beta    []float32 // [B,T,Hv]
	A       []float32 // [B,T,Hv,64]
	H0      []float32 // [N,Hv,128,128]
}

// Bytes is the size of the set's inputs on the device: with g_cumsum and A
// for the core forward (genInputs), with the raw g for the full forward
// (genRecipe alone).
func (h *hostInputs) Bytes() int {
	gates := len(h.G) + len(h.A)
	if h.G == nil {
		gates = len(h.GRaw)
	}
	return h.Dtype.Size()*(len(h.Q)+len(h.K)+len(h.V)) + 4*(gates+len(h.Beta)+len(h.H0))
}

// hostArgs returns the set as the arguments of gdn.Runtime.UploadCore:
// packed sequences in int32, A uploaded in aDtype (FP32 or BF16), h0
// given, the final state asked for.
func (h *hostInputs) hostArgs(aDtype gdn.Dtype) *gdn.HostCoreArgs {
	s := h.Shape
	return &gdn.HostCoreArgs{
		B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: h.Dtype,
		Q: h.Q, K: h.K, V: h.V, G: h.G, Beta: h.Beta, A: h.A, ADtype: aDtype, H0: h.H0, FinalState: true,
	}
}

// hostFullArgs returns the set as the arguments of gdn.Runtime.UploadFull:
// the raw per-token log-gate, l2norm as asked, packed sequences in int32,
// h0 given, the final state asked for.
func (h *hostInputs) hostFullArgs(l2norm bool) *gdn.HostFullArgs {
	s := h.Shape
	return &gdn.HostFullArgs{
		B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: h.Dtype,
		Q: h.Q, K: h.K, V: h.V, G: h.GRaw, Beta: h.Beta, H0: h.H0, FinalState: true, L2Norm: l2norm,
	}
}

// inputBytes is hostInputs.Bytes for a shape, without drawing anything
// (q, k, v at dtypeBytes; g_cumsum, beta, A and h0 in fp32).
func inputBytes(s ref.Shape, dtypeBytes int) int {
	return dtypeBytes*(2*s.QKLen()+s.VLen()) + 4*(2*s.GateLen()+s.ALen()+s.StateLen())
}

// fullInputBytes is inputBytes for the full forward: raw g instead of
// g_cumsum, and no A.
func fullInputBytes(s ref.Shape, dtypeBytes int) int {
	return dtypeBytes*(2*s.QKLen()+s.VLen()) + 4*(2*s.GateLen()+s.StateLen())
}

// RNG streams: every tensor, and every block of it, has its own PCG stream,
// so the values depend on the seed alone, not on the number of goroutines.
const (
	rngQ uint64 = iota + 1
	rngK
	rngV
	rngG
	rngBeta
	rngH0
)

// rngBlock is the number of elements (rows, for q and k) one PCG stream
// fills: large enough to amortise seeding, small enough to balance load.
const rngBlock = 1 << 16

// genInputs draws the docs/SPEC.md recipe for shape s in float32 (genRecipe)
// and computes what the core forward is given: g_cumsum and A, from the
// rounded k, as the kernel sees it.
func genInputs(s ref.Shape, dt gdn.Dtype, seed uint64) *hostInputs {
	h := genRecipe(s, dt, seed, true)
	chunks := chunkList(s)
	h.G = chunkCumsum(s, chunks, h.GRaw)
	h.A = solveA(s, chunks, h.K, h.Beta, h.G)
	return h
}

// genRecipe draws the docs/SPEC.md recipe for shape s in float32: q, k
// L2-normalised per token and head (unit; when false, left as drawn, for a
// full forward that normalises them inside: the recipe's step, done by the
// kernel); v ~ N(0,1); raw g = logsigmoid(N(0,1))/16 except 0 on value heads
// h%4 == 0; beta = sigmoid(N(0,1)); h0 ~ N(0,1). q, k and v are rounded to
// dt (BF16 or FP16). It leaves G and A nil: what the full forward takes.
func genRecipe(s ref.Shape, dt gdn.Dtype, seed uint64, unit bool) *hostInputs {
	h := &hostInputs{Shape: s, Dtype: dt}
	round := roundFunc(dt)
	h.Q = normalRows(s.QKLen(), seed, rngQ, unit, round)
	h.K = normalRows(s.QKLen(), seed, rngK, unit, round)
	h.V = make([]float32, s.VLen())
	fillRand(len(h.V), seed, rngV, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			h.V[i] = round(float32(r.NormFloat64()))
		}
	})

	h.GRaw = make([]float32, s.GateLen())
	fillRand(len(h.GRaw), seed, rngG, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			x := r.NormFloat64() // drawn for every head, so zero-gate heads do not shift the stream
			if !ref.ZeroGateHead(i % s.Hv) {
				h.GRaw[i] = float32(ref.LogSigmoid(x) / 16)
			}
		}
	})
	h.Beta = make([]float32, s.GateLen())
	fillRand(len(h.Beta), seed, rngBeta, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			h.Beta[i] = float32(ref.Sigmoid(r.NormFloat64()))
		}
	})
	h.H0 = make([]float32, s.StateLen())
	fillRand(len(h.H0), seed, rngH0, func(r *rand.Rand, lo, hi int) {
		for i := lo; i < hi; i++ {
			h.H0[i] = float32(r.NormFloat64())
		}
	})

	return h
}

// roundFunc returns the rounding of float32 to dt (BF16 or FP16), widened
// back to float32.
func roundFunc(dt gdn.Dtype) func(float32) float32 {
	if dt == gdn.FP16 {
		return func(x float32) float32 { return dtype.FP16ToFloat32(dtype.RoundFP16(x)) }
	}
	return func(x float32) float32 { return dtype.BF16ToFloat32(dtype.RoundBF16(x)) }
}

// normalRows draws n normals, scales each 128-vector (one token of one
// head) to unit L2 norm when unit, and rounds to 16 bits (returned widened
// to float32).
func normalRows(n int, seed, stream uint64, unit bool, round func(float32) float32) []float32 {
	out := make([]float32, n)
	rows := n / ref.D
	fillRand(rows, seed, stream, func(r *rand.Rand, lo, hi int) {
		var row [ref.D]float64
		for i := lo; i < hi; i++ {
			norm := 0.0
			for j := range row {
				row[j] = r.NormFloat64()
				norm += row[j] * row[j]
			}
			inv := 1.0
			if unit {
				inv = 1 / math.Sqrt(norm) // norm > 0 with probability 1
			}
			for j, x := range row {
				out[i*ref.D+j] = round(float32(x * inv))
			}
		}
	})
	return out
}

// fillRand calls f(r, lo, hi) for consecutive blocks of [0, n), in parallel,
// each block with its own PCG stream derived from (seed, stream, block).
func fillRand(n int, seed, stream uint64, f func(r *rand.Rand, lo, hi int)) {
	blocks := (n + rngBlock - 1) / rngBlock
	parallelFor(blocks, func(b int) {
		r := rand.New(rand.NewPCG(seed, stream<<40|uint64(b)))
		f(r, b*rngBlock, min(n, (b+1)*rngBlock))
	})
}

// parallelFor runs f(0..n-1) on runtime.NumCPU goroutines, handing out
// indices one at a time so that uneven work (long and short chunks)
// balances.
func parallelFor(n int, f func(i int)) {
	workers := min(runtime.NumCPU(), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// chunk is one chunk of a sequence: tokens [start, start+len) of the packed
// token axis.
type chunk struct{ start, len int }

// chunkList returns the chunks of every sequence of s, in order; chunks
// restart at every sequence start and the last one of a sequence may be
// short.
func chunkList(s ref.Shape) []chunk {
	var cs []chunk
	for _, se := range s.Seqs() {
		for c0 := se[0]; c0 < se[1]; c0 += ref.C {
			cs = append(cs, chunk{c0, min(ref.C, se[1]-c0)})
		}
	}
	return cs
}

// chunkCumsum returns the chunk-local running sum of g per value head.
func chunkCumsum(s ref.Shape, chunks []chunk, g []float32) []float32 {
	out := make([]float32, len(g))
	parallelFor(len(chunks), func(ci int) {
		c := chunks[ci]
		for h := range s.Hv {
			var sum float64
			for t := c.start; t < c.start+c.len; t++ {
				sum += float64(g[t*s.Hv+h])
				out[t*s.Hv+h] = float32(sum)
			}
		}
	})
	return out
}

// solveA computes A = (I + StrictLower(diag(beta) K K^T * Gamma))^-1 per
// chunk and value head by forward substitution, in float32. K K^T depends on
// the key head only, so it is formed once per (chunk, key head) and reused
// by the G value heads that share it. Row t of the result holds row
// t - chunk start of its chunk's A; the columns past the chunk's end stay 0.
func solveA(s ref.Shape, chunks []chunk, k, beta, gcum []float32) []float32 {
	A := make([]float32, s.ALen())
	g := s.G()
	parallelFor(len(chunks)*s.Hq, func(task int) {
		c, hk := chunks[task/s.Hq], task%s.Hq
		var kk [ref.C][ref.C]float32
		for i := range c.len {
			ki := k[((c.start+i)*s.Hq+hk)*ref.D:][:ref.D]
			for j := range i {
				kk[i][j] = dot32(ki, k[((c.start+j)*s.Hq+hk)*ref.D:][:ref.D])
			}
		}
		for h := hk * g; h < (hk+1)*g; h++ {
			solveChunk(s, c, h, &kk, beta, gcum, A)
		}
	})
	return A
}

// solveChunk fills the rows of A of one chunk and value head: with
// M_ij = beta_i (k_i . k_j) exp(g_i - g_j) for j < i, (I + M) A = I gives
// A_i = e_i - sum_{j<i} M_ij A_j, and A_j (j < i) is already known.
func solveChunk(s ref.Shape, c chunk, h int, kk *[ref.C][ref.C]float32, beta, gcum, A []float32) {
	row := func(i int) []float32 { return A[((c.start+i)*s.Hv+h)*ref.C:][:ref.C] }
	for i := range c.len {
		ai := row(i)
		ai[i] = 1
		gi := float64(gcum[(c.start+i)*s.Hv+h])
		bi := beta[(c.start+i)*s.Hv+h]
		for j := range i {
			// The difference first: exp(-g_j) alone overflows under strong decay.
			m := bi * kk[i][j] * float32(math.Exp(gi-float64(gcum[(c.start+j)*s.Hv+h])))
			if m == 0 {
				continue
			}
			aj := row(j)
			for x := 0; x <= j; x++ {
				ai[x] -= m * aj[x]
			}
		}
	}
}

// dot32 is the inner product of two 128-vectors. Four partial sums break
// the dependency chain of one running sum: this loop is most of the time
// spent drawing inputs.
func dot32(x, y []float32) float32 {
	x, y = x[:ref.D], y[:ref.D]
	var s0, s1, s2, s3 float32
	for i := 0; i < ref.D; i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	return (s0 + s1) + (s2 + s3)
}
