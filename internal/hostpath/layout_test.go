package hostpath

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
)

// ramp returns n values from v up, 1/1024 apart.
func ramp(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v + float32(i)/1024
	}
	return x
}

// layoutArgs is a small packed call with every optional tensor.
func layoutArgs() *CoreArgs {
	const T, Hq, Hv = 5, 1, 2
	return &CoreArgs{B: 1, T: T, Hq: Hq, Hv: Hv, CuSeqlens: []int{0, 2, 5}, Dtype: dtype.BF16,
		Q: ramp(T*Hq*128, 0.1), K: ramp(T*Hq*128, 0.2), V: ramp(T*Hv*128, 1), G: ramp(T*Hv, -0.5),
		Beta: ramp(T*Hv, 0.25), A: ramp(T*Hv*64, 0.01), H0: ramp(2*Hv*128*128, 3), FinalState: true}
}

// layoutBase is the device address the layout tests bind calls at.
const layoutBase = 0x7f0000000000

// checkPlacement checks that the tensors of l, bound at layoutBase, lie
// in order, aligned, apart and inside the block, inputs before outputs,
// and that binding left l's own tensors unbound.
func checkPlacement(t *testing.T, l *Layout) {
	t.Helper()
	end := uintptr(layoutBase)
	bound := l.bind(layoutBase)
	for _, s := range append(append([]layoutSlot{}, l.in...), l.out...) {
		tn := bound[s.id]
		if tn.Ptr != layoutBase+uintptr(s.off) || s.off%layoutAlign != 0 || tn.Ptr < end {
			t.Errorf("tensor %d at %#x (offset %d) overlaps or is misaligned", s.id, tn.Ptr, s.off)
		}
		end = tn.Ptr + uintptr(tn.Bytes)
	}
	if end > layoutBase+uintptr(l.total) || l.inBytes > l.total {
		t.Errorf("tensors end at %#x, block %d bytes (inputs %d)", end-layoutBase, l.total, l.inBytes)
	}
	if l.tensors[tensorQ].Ptr != 0 {
		t.Error("bind changed the layout's own tensors")
	}
}

// The layout's problem.Core, bound to an address, pass ValidateCore: offsets,
// shapes, dtypes and sizes agree with Forward's rules.
func TestHostLayoutValidates(t *testing.T) {
	for _, edit := range []func(h *CoreArgs){
		func(h *CoreArgs) {},
		func(h *CoreArgs) {
			h.Dtype, h.BetaDtype, h.ADtype, h.SeqlensDtype = dtype.FP16, dtype.FP16, dtype.BF16, dtype.Int64
		},
		func(h *CoreArgs) { h.H0, h.FinalState, h.CuSeqlens, h.B = nil, false, nil, 1 },
	} {
		h := layoutArgs()
		edit(h)
		l, err := NewCoreLayout(h)
		if err != nil {
			t.Fatal(err)
		}
		p, err := problem.ValidateCore(l.coreArgs(layoutBase))
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if p.HasH0 != (h.H0 != nil) || p.HasHt != h.FinalState || p.Dtype != h.Dtype {
			t.Errorf("problem %+v from %+v", p, h)
		}
		checkPlacement(t, l)
	}
}

func TestHostLayoutEncodeDecode(t *testing.T) {
	h := layoutArgs()
	h.SeqlensDtype = dtype.Int64
	l, err := NewCoreLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, l.total)
	l.encodeInputs(buf)
	a := l.coreArgs(0x1000)
	at := func(tn problem.Tensor) []byte { off := int(tn.Ptr - 0x1000); return buf[off : off+tn.Bytes] }
	q := at(a.Q)
	for i, v := range h.Q {
		if got := binary.NativeEndian.Uint16(q[2*i:]); got != dtype.RoundBF16(v) {
			t.Fatalf("q[%d] = %#x, want %#x", i, got, dtype.RoundBF16(v))
		}
	}
	if g := at(a.G); math.Float32frombits(binary.NativeEndian.Uint32(g[4:])) != h.G[1] {
		t.Error("g not copied as fp32")
	}
	cu := at(a.CuSeqlensDevice)
	for i, v := range h.CuSeqlens {
		if got := binary.NativeEndian.Uint64(cu[8*i:]); got != uint64(v) {
			t.Errorf("cu_seqlens[%d] = %d, want %d", i, got, v)
		}
	}
	// Outputs as the device would leave them: o in bf16, ht in fp32.
	o, ht := at(a.O), at(a.Ht)
	for i := range a.O.Elems() {
		binary.NativeEndian.PutUint16(o[2*i:], dtype.RoundBF16(float32(i%7)-3))
	}
	for i := range a.Ht.Elems() {
		binary.NativeEndian.PutUint32(ht[4*i:], math.Float32bits(float32(i)))
	}
	res := &Result{}
	l.decodeOutputs(buf, res)
	if len(res.O) != a.O.Elems() || res.O[4] != 1 || len(res.Ht) != a.Ht.Elems() || res.Ht[12345] != 12345 {
		t.Errorf("decoded o[4] = %v (%d values), ht[12345] = %v (%d values)", res.O[4], len(res.O), res.Ht[12345], len(res.Ht))
	}
}

// Bad arguments name the field, before anything is allocated.
func TestHostLayoutErrors(t *testing.T) {
	for _, c := range []struct {
		arg  string
		edit func(h *CoreArgs)
	}{
		{"q", func(h *CoreArgs) { h.Q = h.Q[1:] }},
		{"v", func(h *CoreArgs) { h.V = nil }},
		{"A", func(h *CoreArgs) { h.A = append(h.A, 0) }},
		{"h0", func(h *CoreArgs) { h.H0 = h.H0[:10] }},
		{"cu_seqlens", func(h *CoreArgs) { h.CuSeqlens = []int{0, 6} }},
		{"SeqlensDtype", func(h *CoreArgs) { h.SeqlensDtype = dtype.FP32 }},
		{"Dtype", func(h *CoreArgs) { h.Dtype = dtype.Invalid }},
		// What Forward would refuse later, after the staging memory (a
		// state per sequence) was allocated and the inputs copied.
		{"scale", func(h *CoreArgs) { h.Scale = float32(math.NaN()) }},
		{"scale", func(h *CoreArgs) { h.Scale = float32(math.Inf(-1)) }},
		{"cu_seqlens", func(h *CoreArgs) { h.CuSeqlens, h.H0, h.FinalState = manySeqs(h.T), nil, false }},
		{"B", func(h *CoreArgs) { h.CuSeqlens, h.B, h.T = nil, problem.MaxSeqs+1, 1 }},
	} {
		h := layoutArgs()
		c.edit(h)
		_, err := NewCoreLayout(h)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s: %v", c.arg, err)
		}
	}
	if _, err := NewCoreLayout(nil); err == nil {
		t.Error("nil args: no error")
	}
}

// manySeqs is cu_seqlens over t tokens with one sequence more than a call
// runs: all empty but the last.
func manySeqs(t int) []int {
	cu := make([]int, problem.MaxSeqs+2)
	cu[len(cu)-1] = t
	return cu
}

// A layout keeps its own copy of cu_seqlens: the caller's slice changed
// after the call was checked changes neither the boundaries the call runs
// with nor the device copy, which must agree (an upload's Args outlive the
// call that made them).
func TestHostLayoutOwnsCuSeqlens(t *testing.T) {
	h := layoutArgs()
	l, err := NewCoreLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	fh := fullHostArgs()
	fl, err := NewFullLayout(fh)
	if err != nil {
		t.Fatal(err)
	}
	h.CuSeqlens[1], fh.CuSeqlens[1] = 4, 4
	buf := make([]byte, l.total)
	l.encodeInts(buf)
	a := l.coreArgs(0)
	dev := binary.NativeEndian.Uint32(buf[a.CuSeqlensDevice.Ptr+4:]) // int32 entry 1
	if a.CuSeqlens[1] != 2 || dev != 2 {
		t.Errorf("core: cu_seqlens %v, device copy [1] = %d after the caller's slice changed; want 2", a.CuSeqlens, dev)
	}
	if fa := fl.fullArgs(0); fa.CuSeqlens[1] != 2 {
		t.Errorf("full: cu_seqlens %v after the caller's slice changed; want 2 at [1]", fa.CuSeqlens)
	}
}

// prefillHostArgs is the batch of examples/prefill as a host call, zeros:
// 7,896 tokens in 4 sequences, Hq 16, Hv 32, bf16, with h0 (204 MB of
// inputs on the device), without the final state.
func prefillHostArgs() *CoreArgs {
	const T, hq, hv, n = 7896, 16, 32, 4
	return &CoreArgs{B: 1, T: T, Hq: hq, Hv: hv, Dtype: dtype.BF16, CuSeqlens: []int{0, 4096, 5096, 7596, 7896},
		Q: make([]float32, T*hq*128), K: make([]float32, T*hq*128), V: make([]float32, T*hv*128),
		G: make([]float32, T*hv), Beta: make([]float32, T*hv), A: make([]float32, T*hv*64),
		H0: make([]float32, n*hv*128*128)}
}

// BenchmarkEncodeInputs converts the inputs of prefillHostArgs into their
// device encoding, as ForwardHost does before its copy; it runs on every
// core (-cpu to vary).
func BenchmarkEncodeInputs(b *testing.B) {
	l, err := NewCoreLayout(prefillHostArgs())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, l.total)
	b.SetBytes(int64(l.inBytes))
	for b.Loop() {
		l.encodeInputs(buf)
	}
}

// decodeOutputs into a result that already holds slices: arrays large
// enough are reused and fully overwritten, short ones replaced; without a
// final state Ht keeps its array at length 0.
func TestDecodeOutputsReusesResult(t *testing.T) {
	h := layoutArgs()
	l, err := NewCoreLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, l.total)
	a := l.coreArgs(0)
	o := asUint16(buf[a.O.Ptr:], a.O.Elems())
	for i := range o {
		o[i] = dtype.RoundBF16(float32(i%9) - 4)
	}
	ht := asFloat32(buf[a.Ht.Ptr:], a.Ht.Elems())
	for i := range ht {
		ht[i] = float32(i) / 3
	}
	want := &Result{}
	l.decodeOutputs(buf, want)

	big := make([]float32, a.O.Elems()+10)
	for i := range big {
		big[i] = float32(math.NaN())
	}
	res := &Result{O: big, Ht: make([]float32, 3)}
	l.decodeOutputs(buf, res)
	if &res.O[0] != &big[0] || len(res.O) != a.O.Elems() {
		t.Errorf("o: a large enough array was not reused at the output's length (len %d)", len(res.O))
	}
	if len(res.Ht) != a.Ht.Elems() || cap(res.Ht) == 3 {
		t.Errorf("ht: a short array was not replaced (len %d, cap %d)", len(res.Ht), cap(res.Ht))
	}
	for i := range want.O {
		if math.Float32bits(res.O[i]) != math.Float32bits(want.O[i]) {
			t.Fatalf("o[%d] = %v in a reused array, want %v", i, res.O[i], want.O[i])
		}
	}
	for i := range want.Ht {
		if res.Ht[i] != want.Ht[i] {
			t.Fatalf("ht[%d] = %v, want %v", i, res.Ht[i], want.Ht[i])
		}
	}

	h.FinalState = false
	if l, err = NewCoreLayout(h); err != nil {
		t.Fatal(err)
	}
	keep := res.Ht
	l.decodeOutputs(make([]byte, l.total), res)
	if len(res.Ht) != 0 || cap(res.Ht) != cap(keep) || &res.O[0] != &big[0] {
		t.Errorf("without a final state: ht len %d cap %d (want 0, %d); o reused %v", len(res.Ht), cap(res.Ht), cap(keep), &res.O[0] == &big[0])
	}
	fresh := &Result{}
	l.decodeOutputs(make([]byte, l.total), fresh)
	if fresh.Ht != nil {
		t.Error("a fresh result got a non-nil Ht without a final state")
	}
}
