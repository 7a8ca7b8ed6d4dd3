package plan

import (
	"fmt"
	"math"

	"github.com/gdnjit/gdn/internal/problem"
)

// SegmentTables lays out the segments of a split plan for the device:
//
//   - output pairs, (N + P) x (begin, end) int32 tokens: first the last
//     segment of each sequence (grid row n < N writes ht[n]), then the
//     transfer segments in sequence and token order;
//   - transfer pairs, P x (begin, end): the same transfer segments;
//   - first, N + 1 int32: sequence n's transfer segments are first[n] ..
//     first[n+1] - 1;
//   - with early, firsts, N x (begin, end): each sequence's first segment,
//     which is then in neither of the other lists (the early pass's rows;
//     every sequence must be longer than one segment).
//
// Tokens are flat indices into the B*T tokens (a batch without cu_seqlens
// is N packed sequences of T tokens).
func SegmentTables(p problem.Problem, segChunks int, early bool) (output, transfer, first, firsts []int32, err error) {
	if tok := p.Tokens(); tok > math.MaxInt32 {
		return nil, nil, nil, nil, fmt.Errorf("gdn: %d tokens: a split plan indexes tokens in 32 bits", tok)
	}
	seg := segChunks * problem.ChunkLen
	var last []int32
	first = make([]int32, 0, p.N+1)
	for n := 0; n < p.N; n++ {
		b, e := p.SeqBounds(n)
		if early {
			if e-b <= seg {
				return nil, nil, nil, nil, fmt.Errorf("gdn: an early split plan with sequence %d of %d tokens in segments of %d", n, e-b, seg)
			}
			firsts = append(firsts, int32(b), int32(b+seg))
			b += seg
		}
		first = append(first, int32(len(transfer)/2))
		for ; e-b > seg; b += seg {
			transfer = append(transfer, int32(b), int32(b+seg))
		}
		last = append(last, int32(b), int32(e))
	}
	first = append(first, int32(len(transfer)/2))
	return append(last, transfer...), transfer, first, firsts, nil
}
