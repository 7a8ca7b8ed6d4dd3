package launch

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/kernsrc"
)

// fakeEncoder stands in for cuTensorMapEncodeTiled on the CPU: the map it
// returns spells out its inputs, so blocks of different calls differ where
// the real maps would, and it counts its calls.
type fakeEncoder struct{ calls atomic.Int64 }

func (f *fakeEncoder) encode(dt driver.TensorDtype, base driver.DevicePtr, dims, strides []uint64, box []uint32, sw driver.Swizzle) (driver.TensorMap, error) {
	f.calls.Add(1)
	var m driver.TensorMap
	binary.LittleEndian.PutUint64(m[0:], uint64(base))
	m[8], m[9] = byte(dt), byte(sw)
	for i, d := range dims {
		binary.LittleEndian.PutUint64(m[16+8*i:], d)
	}
	for i, s := range strides {
		binary.LittleEndian.PutUint64(m[48+8*i:], s)
	}
	for i, b := range box {
		binary.LittleEndian.PutUint32(m[72+4*i:], b)
	}
	return m, nil
}

// hostPath is a Runtime's call cache without a device: a fake encoder, no
// C copy of the parameters, no scratch (so no split), an H200's 132 SMs.
func hostPath() (*callCache, *fakeEncoder) {
	f := &fakeEncoder{}
	return newCallCache(132, plan.Knobs{}, f.encode, nil, nil), f
}

// hostPathCall is Forward's host path as the benchmark and the allocation
// test run it: everything before the first driver call of a repeated call
// (prepare: validate, look the call up; the graph's due count), then the
// release.
func hostPathCall(c *callCache, a *problem.Core) error {
	e, err := c.prepare(a)
	if err != nil {
		return err
	}
	e.graph.due()
	c.release(e)
	return nil
}

// A repeated Forward allocates nothing on the host, and encodes no tensor
// map after the first call: the CI guard of the 0 allocs/op that
// BenchmarkForward reports.
func TestCallCacheRepeatAllocs(t *testing.T) {
	for name, a := range map[string]*problem.Core{"batch": problemtest.Core(4, 2048, 16, 32), "varlen": problemtest.Varlen()} {
		t.Run(name, func(t *testing.T) {
			c, f := hostPath()
			if err := hostPathCall(c, a); err != nil {
				t.Fatal(err)
			}
			if n := f.calls.Load(); n != 5 {
				t.Fatalf("first call encoded %d tensor maps, want 5", n)
			}
			if allocs := testing.AllocsPerRun(100, func() {
				if err := hostPathCall(c, a); err != nil {
					t.Fatal(err)
				}
			}); allocs != 0 {
				t.Errorf("repeated call: %v allocs, want 0", allocs)
			}
			if n := f.calls.Load(); n != 5 {
				t.Errorf("repeated calls encoded tensor maps (%d in all, want 5)", n)
			}
		})
	}
}

// The cached block is the block of the call's own arguments: every field
// of the key reaches it, and a call differing in any one of them gets an
// entry of its own. The same address and shape (a buffer freed and another
// allocated in its place) get the same block, which is then still right.
func TestCallCacheBlocks(t *testing.T) {
	c, f := hostPath()
	base := problemtest.Core(2, 130, 4, 8)
	mutations := map[string]func(a *problem.Core){
		"same":   func(a *problem.Core) {},
		"q":      func(a *problem.Core) { a.Q.Ptr += 1 << 30 },
		"k":      func(a *problem.Core) { a.K.Ptr += 1 << 30 },
		"v":      func(a *problem.Core) { a.V.Ptr += 1 << 30 },
		"g":      func(a *problem.Core) { a.G.Ptr += 1 << 30 },
		"beta":   func(a *problem.Core) { a.Beta.Ptr += 1 << 30 },
		"A":      func(a *problem.Core) { a.A.Ptr += 1 << 30 },
		"h0":     func(a *problem.Core) { a.H0.Ptr += 1 << 30 },
		"ht":     func(a *problem.Core) { a.Ht.Ptr += 1 << 30 },
		"o":      func(a *problem.Core) { a.O.Ptr += 1 << 30 },
		"no h0":  func(a *problem.Core) { a.H0 = problem.Tensor{} },
		"no ht":  func(a *problem.Core) { a.Ht = problem.Tensor{} },
		"scale":  func(a *problem.Core) { a.Scale = 0.5 },
		"beta16": func(a *problem.Core) { a.Beta.Dtype, a.Beta.Bytes = dtype.BF16, a.Beta.Bytes/2 },
		"A bf16": func(a *problem.Core) { a.A.Dtype = dtype.BF16 },
		"T": func(a *problem.Core) {
			for _, x := range []*problem.Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.A, &a.O} {
				x.Shape = append([]int(nil), x.Shape...)
				x.Shape[1] = 129
			}
		},
	}
	blocks := map[[kernsrc.HopperParamsBytes]byte]string{}
	ref, err := c.prepare(base)
	if err != nil {
		t.Fatal(err)
	}
	c.release(ref)
	for name, mutate := range mutations {
		a := *base
		mutate(&a)
		e, err := c.prepare(&a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.release(e)
		if name == "same" {
			if e != ref {
				t.Errorf("identical arguments got a new entry")
			}
			continue
		}
		if e == ref || e.block == ref.block {
			t.Errorf("%s: the call shares the first call's entry or block", name)
		}
		if other, dup := blocks[e.block]; dup {
			t.Errorf("%s and %s have the same block", name, other)
		}
		blocks[e.block] = name
		// The block is what the uncached path packs for these arguments.
		p, _ := problem.ValidateCore(&a)
		var want [kernsrc.HopperParamsBytes]byte
		if err := newHopperCall(&a, p).params(f.encode, &want); err != nil || want != e.block {
			t.Errorf("%s: cached block differs from a fresh one (%v)", name, err)
		}
	}
	if n := c.len(); n != len(mutations) {
		t.Errorf("%d cached calls, want %d", n, len(mutations))
	}
}

// Errors of the cached path are ValidateCore's, and nothing is cached.
func TestCallCacheErrors(t *testing.T) {
	c, f := hostPath()
	a := problemtest.Core(2, 100, 2, 8)
	a.V.Ptr = 0
	_, want := problem.ValidateCore(a)
	_, err := c.prepare(a)
	var ae *gdnerr.ArgError
	if !errors.Is(err, gdnerr.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != "v" || err.Error() != want.Error() {
		t.Errorf("prepare = %v, want %v", err, want)
	}
	if _, err := c.prepare(nil); !errors.As(err, &ae) || ae.Arg != "args" {
		t.Errorf("prepare(nil) = %v", err)
	}
	fail := newCallCache(132, plan.Knobs{}, func(driver.TensorDtype, driver.DevicePtr, []uint64, []uint64, []uint32, driver.Swizzle) (driver.TensorMap, error) {
		return driver.TensorMap{}, errors.New("encode failed")
	}, nil, nil)
	if _, err := fail.prepare(problemtest.Core(1, 10, 1, 1)); err == nil {
		t.Error("a failed encoding was not an error")
	}
	if c.len() != 0 || fail.len() != 0 || f.calls.Load() != 0 {
		t.Errorf("failed calls were cached (%d, %d entries, %d encodings)", c.len(), fail.len(), f.calls.Load())
	}
}

// A full cache evicts; an entry evicted while a call holds it is freed when
// that call releases it, never before. Close frees the rest and refuses
// later calls.
func TestCallCacheEviction(t *testing.T) {
	c, _ := hostPath()
	c.held.limit = 4
	args := func(i int) *problem.Core {
		a := problemtest.Core(1, 64, 1, 1)
		a.O.Ptr = uintptr(1+i) << 32
		return a
	}
	held, err := c.prepare(args(0))
	if err != nil {
		t.Fatal(err)
	}
	var all []*callEntry
	// Eviction picks at random: the held entry goes, with odds 1/4 each
	// time, well within 1000 new calls.
	for i := 1; i < 1000 && !held.evicted; i++ {
		e, err := c.prepare(args(i))
		if err != nil {
			t.Fatal(err)
		}
		c.release(e)
		all = append(all, e)
		if n := c.len(); n > c.held.limit {
			t.Fatalf("%d entries, limit %d", n, c.held.limit)
		}
	}
	if !held.evicted {
		t.Fatal("1000 newer calls did not evict the first")
	}
	if held.freed.Load() {
		t.Fatal("an entry held by a call was freed")
	}
	c.release(held)
	if !held.freed.Load() {
		t.Error("an evicted entry was not freed on its last release")
	}
	evicted := 0
	for _, e := range all {
		if e.evicted != e.freed.Load() {
			t.Errorf("entry evicted=%v freed=%v", e.evicted, e.freed.Load())
		}
		if e.evicted {
			evicted++
		}
	}
	if evicted != len(all)-c.len() {
		t.Errorf("%d evicted, want %d", evicted, len(all)-c.len())
	}
	c.close()
	for _, e := range all {
		if !e.freed.Load() {
			t.Error("close left an entry unfreed")
		}
	}
	if _, err := c.prepare(args(1)); !errors.Is(err, gdnerr.ErrClosed) {
		t.Errorf("prepare after close: %v", err)
	}
}

// Many goroutines on few argument sets and a small cache: every call gets
// the block of its own arguments, no entry is freed while held (run with
// -race), and all are freed after close.
func TestCallCacheConcurrent(t *testing.T) {
	c, f := hostPath()
	c.held.limit = 3
	const sets = 6
	want := make([][kernsrc.HopperParamsBytes]byte, sets)
	args := make([]*problem.Core, sets)
	for i := range args {
		args[i] = problemtest.Core(1+i%2, 64, 2, 4)
		args[i].O.Ptr = uintptr(1+i) << 32
		p, _ := problem.ValidateCore(args[i])
		newHopperCall(args[i], p).params(f.encode, &want[i])
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seen []*callEntry
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				s := (g + i) % sets
				e, err := c.prepare(args[s])
				if err != nil {
					t.Error(err)
					return
				}
				if e.freed.Load() || e.block != want[s] {
					t.Errorf("set %d: entry freed=%v, block matches=%v", s, e.freed.Load(), e.block == want[s])
				}
				e.graph.due()
				if i%50 == 0 {
					mu.Lock()
					seen = append(seen, e)
					mu.Unlock()
				}
				c.release(e)
			}
		})
	}
	wg.Wait()
	c.close()
	for _, e := range seen {
		if !e.freed.Load() || e.refs != 0 {
			t.Fatalf("after close: entry freed=%v refs=%d", e.freed.Load(), e.refs)
		}
	}
}

// BenchmarkForward is the host path of a repeated Forward (validate, look
// up the prepared call with its plan and encoded parameters, the graph's
// due count, release), without the driver calls that follow (see
// BenchmarkGPUForward for those, on the GPU).
func BenchmarkForward(b *testing.B) {
	for name, a := range map[string]*problem.Core{"batch": problemtest.Core(4, 2048, 16, 32), "varlen": problemtest.Varlen()} {
		b.Run(name, func(b *testing.B) {
			c, _ := hostPath()
			b.ReportAllocs()
			for b.Loop() {
				if err := hostPathCall(c, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A prepared call's plan is the plan of its own packed sequences: the same
// buffers, N and T with other boundaries (cu_seqlens rewritten in place)
// must not be served the plan cached for the old ones. On an H200's 132
// SMs two sequences of 64 value heads take the 128-wide tile when the
// chains are equal and the 64-wide one when one sequence holds every token.
func TestCallCachePlanFollowsSequences(t *testing.T) {
	c, _ := hostPath()
	args := func(cu []int) *problem.Core {
		a := problemtest.Core(1, 4096, 16, 64)
		problemtest.WithStates(a, 2)
		a.CuSeqlens = cu
		a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 24, Dtype: dtype.Int64, Shape: []int{3}}
		return a
	}
	even, skewed := args([]int{0, 2048, 4096}), args([]int{0, 4096, 4096})
	var widths []int
	for _, a := range []*problem.Core{even, skewed, even} {
		p, err := problem.ValidateCore(a)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plan.Core(p, 132, plan.Knobs{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := c.prepare(a)
		if err != nil {
			t.Fatal(err)
		}
		c.release(e)
		if e.plan.String() != want.String() || e.plan.TileWidth != want.TileWidth {
			t.Errorf("cu_seqlens %v: prepared plan %v, the planner's %v", a.CuSeqlens, e.plan, want)
		}
		widths = append(widths, want.TileWidth)
	}
	if widths[0] == widths[1] {
		t.Fatalf("the test's sequences no longer get different tiles (%v): pick others", widths)
	}
}

// A forced variant that does not suit the call's dtype is an *ArgError
// naming "variant", returned before anything is prepared (Forward returns
// it before the device is touched).
func TestCallCacheForcedVariant(t *testing.T) {
	c := newCallCache(132, plan.Knobs{Variant: "gdn_hopper_fp16_bv64"}, (&fakeEncoder{}).encode, nil, nil)
	var ae *gdnerr.ArgError
	if _, err := c.prepare(problemtest.Core(1, 10, 1, 2)); !errors.As(err, &ae) || ae.Arg != "variant" {
		t.Errorf("bf16 inputs with an fp16 variant: %v", err)
	}
	if c.len() != 0 {
		t.Errorf("%d calls cached", c.len())
	}
}
