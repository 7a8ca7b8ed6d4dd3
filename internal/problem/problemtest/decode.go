package problemtest

import (
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// Decode returns a valid decode call of B sequences of T tokens in bf16
// (beta in fp32), from an fp32 pool of 2B slots whose table gives sequence
// n slot 2n, each tensor at its own address.
func Decode(b, t, hq, hv int) *problem.Decode {
	c := Core(b, t, hq, hv)
	pool := problem.Tensor{Ptr: 1 << 41, Dtype: dtype.FP32, Shape: []int{2 * b, hv, 128, 128}}
	pool.Bytes = pool.Elems() * 4
	slots := make([]int, b)
	for i := range slots {
		slots[i] = 2 * i
	}
	return &problem.Decode{Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, O: c.O,
		Pool: problem.Pool{States: pool, Slots: slots, SlotsDevice: problem.Tensor{Ptr: 1 << 42, Bytes: 4 * b, Dtype: dtype.Int32, Shape: []int{b}}}}
}
