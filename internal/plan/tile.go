package plan

import (
	"math"

	"github.com/gdnjit/gdn/internal/problem"
)

// Time one CTA spends per chunk with a 64- and a 128-wide value tile, on
// the H200 with the GPU full (kernel v9, docs/PERF.md): the 128-wide tile
// does twice the work per chunk in a little under twice the time (two
// consumer warpgroups share one aux warpgroup's gates, A2 and P), the
// 64-wide one has half the latency along a chain.
const (
	chunkTime64  = 2.2 // microseconds
	chunkTime128 = 4.2
)

// chooseConsumers is the planner's cost model: it returns the consumer
// warpgroups (1: 64-wide tiles, 2: 128-wide) that minimise the estimated
// time chunkTime x max(L, waves x W/N), where L is the longest sequence in
// chunks (no CTA can finish sooner), W/N the mean chunks of a CTA, and
// waves = ceil(CTAs / sms) how many rounds of CTAs the multiprocessors run
// (for equal lengths, waves x L). Checked against the measured times of the
// benchmark suite (docs/PERF.md): it picks the faster tile on every case.
func chooseConsumers(p problem.Problem, sms int) int {
	longest, total := ChainChunks(p)
	if longest == 0 || p.N == 0 {
		return 1
	}
	sms = max(sms, 1)
	best, bestTime := 1, math.Inf(1)
	for _, nc := range []int{1, 2} {
		ctas := p.N * p.Hv * (2 / nc)
		waves := (ctas + sms - 1) / sms
		chain := max(float64(longest), float64(waves)*float64(total)/float64(p.N))
		t := chunkTime64 * chain
		if nc == 2 {
			t = chunkTime128 * chain
		}
		if t < bestTime {
			best, bestTime = nc, t
		}
	}
	return best
}

func chunkTime(consumers int) float64 {
	if consumers == 2 {
		return chunkTime128
	}
	return chunkTime64
}

// ChainChunks returns the longest sequence and the sum over sequences, in
// chunks of ChunkLen tokens: the chains the cost models weigh.
func ChainChunks(p problem.Problem) (longest, total int) {
	if p.Seqs == nil {
		l := (p.T + problem.ChunkLen - 1) / problem.ChunkLen
		return l, p.N * l
	}
	for i := 0; i+1 < len(p.Seqs); i++ {
		l := (p.Seqs[i+1] - p.Seqs[i] + problem.ChunkLen - 1) / problem.ChunkLen
		longest = max(longest, l)
		total += l
	}
	return longest, total
}

// seqChunks calls f with each sequence's length in chunks.
func seqChunks(p problem.Problem, f func(chunks int)) {
	if p.Seqs == nil {
		l := (p.T + problem.ChunkLen - 1) / problem.ChunkLen
		for n := 0; n < p.N; n++ {
			f(l)
		}
		return
	}
	for i := 0; i+1 < len(p.Seqs); i++ {
		f((p.Seqs[i+1] - p.Seqs[i] + problem.ChunkLen - 1) / problem.ChunkLen)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
