package ref

import (
	"slices"
	"time"
)

// Case is one row of the benchmark suite of docs/BENCH.md: Hq query/key
// heads, Hv value heads and the packed sequence lengths. Every case runs
// with h0 and returns the final state, on the docs/SPEC.md recipe.
type Case struct {
	Name   string
	Hq, Hv int
	Lens   []int
}

// The H200 roofline of docs/BENCH.md.
const (
	PeakFLOPs = 790e12 // dense bf16 tensor-core FLOP/s
	PeakBytes = 4.3e12 // HBM bytes/s
)

// FLOPs per token of docs/BENCH.md's minimal count.
const (
	flopsPerValueHead = 131072 // K@S, A@W', Q@S, scores@V_new, state update
	flopsPerKeyHead   = 32768  // QK^T, KK^T
)

// Shape returns the case's shape: B = 1, T = the sum of Lens, and CuSeqlens
// set when there is more than one sequence (nil for one).
func (c Case) Shape() Shape {
	s := Shape{B: 1, Hq: c.Hq, Hv: c.Hv}
	if len(c.Lens) > 1 {
		s.CuSeqlens = make([]int, 1, len(c.Lens)+1)
	}
	for _, l := range c.Lens {
		s.T += l
		if s.CuSeqlens != nil {
			s.CuSeqlens = append(s.CuSeqlens, s.T)
		}
	}
	return s
}

// tokens returns the total token count.
func (c Case) tokens() float64 {
	t := 0
	for _, l := range c.Lens {
		t += l
	}
	return float64(t)
}

// FLOPs returns docs/BENCH.md's minimal floating-point operation count:
// per token, 131072 per value head plus 32768 per key head.
func (c Case) FLOPs() float64 {
	return c.tokens() * (flopsPerValueHead*float64(c.Hv) + flopsPerKeyHead*float64(c.Hq))
}

// MinBytes returns docs/BENCH.md's minimal memory traffic with q, k, v and o at
// dtypeBytes per element: q, k, v read and o written; g and beta read at
// 4 B each per token and value head; h0 read and ht written in fp32.
func (c Case) MinBytes(dtypeBytes int) float64 {
	t := c.tokens()
	b := float64(dtypeBytes)
	qk := 2 * t * float64(c.Hq*D) * b
	vo := 2 * t * float64(c.Hv*D) * b
	gates := 2 * t * float64(c.Hv) * 4
	state := 2 * float64(len(c.Lens)*c.Hv*D*D) * 4
	return qk + vo + gates + state
}

// FloorMs returns the roofline floor in milliseconds for bf16 inputs:
// max(FLOPs / PeakFLOPs, MinBytes(2) / PeakBytes).
func (c Case) FloorMs() float64 {
	return 1e3 * max(c.FLOPs()/PeakFLOPs, c.MinBytes(2)/PeakBytes)
}

// Floor returns FloorMs as a time.Duration.
func (c Case) Floor() time.Duration {
	return time.Duration(c.FloorMs() * float64(time.Millisecond))
}

// repeat returns n copies of l.
func repeat(l, n int) []int { return slices.Repeat([]int{l}, n) }

// Suite is the benchmark suite of docs/BENCH.md, in its order.
var Suite = []Case{
	{"tp8_32k", 2, 8, []int{32768}},
	{"tp8_8k", 2, 8, []int{8192}},
	{"tp8_2k", 2, 8, []int{2048}},
	{"tp4_32k", 4, 16, []int{32768}},
	{"tp2_32k", 8, 32, []int{32768}},
	{"tp2_16kx2", 8, 32, []int{16384, 16384}},
	{"q35_4kx8", 16, 32, repeat(4096, 8)},
	{"q35_1kx8", 16, 32, repeat(1024, 8)},
	{"q397_32k", 16, 64, []int{32768}},
	{"q397_4kx8", 16, 64, repeat(4096, 8)},
	{"sym32_8kx4", 32, 32, repeat(8192, 4)},
	{"chain_equal", 4, 4, []int{16384}},
	{"short_tail_state", 16, 32, []int{300}},
	{"varlen_mix", 16, 32, []int{7000, 33, 1, 4096, 511, 2048, 64, 129}},
}

// CaseByName returns a copy of the Suite case called name.
func CaseByName(name string) (Case, bool) {
	for _, c := range Suite {
		if c.Name == name {
			c.Lens = slices.Clone(c.Lens) // so callers cannot edit Suite
			return c, true
		}
	}
	return Case{}, false
}
