package problem

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// testDecode is a valid decode call of B sequences of T tokens, every
// tensor at an address of its own (1 TB apart), a pool of 2B slots.
func testDecode(b, t, hq, hv int) *Decode {
	next := uintptr(1 << 40)
	mk := func(dt dtype.Dtype, shape ...int) Tensor {
		x := Tensor{Ptr: next, Dtype: dt, Shape: shape}
		x.Bytes = x.Elems() * dt.Size()
		next += 1 << 40
		return x
	}
	slots := make([]int, b)
	for i := range slots {
		slots[i] = 2*b - 1 - 2*i
	}
	a := &Decode{
		Q: mk(dtype.BF16, b, t, hq, HeadDim), K: mk(dtype.BF16, b, t, hq, HeadDim), V: mk(dtype.BF16, b, t, hv, HeadDim),
		G: mk(dtype.FP32, b, t, hv), Beta: mk(dtype.BF16, b, t, hv), O: mk(dtype.BF16, b, t, hv, HeadDim),
		Pool: Pool{States: mk(dtype.FP32, 2*b, hv, HeadDim, HeadDim), Slots: slots, SlotsDevice: mk(dtype.Int32, b)},
	}
	return a
}

// packed turns a into one packed batch of sequences of the given lengths.
func packed(a *Decode, lens ...int) {
	tokens := 0
	cu := []int{0}
	for _, l := range lens {
		tokens += l
		cu = append(cu, tokens)
	}
	for _, x := range []*Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.O} {
		x.Shape = append([]int{1, tokens}, x.Shape[2:]...)
		x.Bytes = x.Elems() * x.Dtype.Size()
	}
	a.CuSeqlens = cu
	a.CuSeqlensDevice = Tensor{Ptr: 1 << 50, Bytes: 8 * len(cu), Dtype: dtype.Int64, Shape: []int{len(cu)}}
	a.Pool.Slots = a.Pool.Slots[:len(lens)]
	a.Pool.SlotsDevice.Shape = []int{len(lens)}
}

func TestValidateDecode(t *testing.T) {
	a := testDecode(4, 3, 2, 4)
	d, err := ValidateDecode(a)
	if err != nil || d.N != 4 || d.T != 3 || d.Hv != 4 || d.Pool.S != 8 || d.Pool.Dtype != dtype.FP32 || d.HasTokenStates ||
		d.BetaDtype != dtype.BF16 || d.Scale == 0 {
		t.Fatalf("valid call: %+v, %v", d, err)
	}
	a = testDecode(4, 8, 1, 2)
	a.TokenStates = Tensor{Ptr: 1 << 52, Dtype: dtype.FP32, Shape: []int{32, 2, HeadDim, HeadDim}}
	a.TokenStates.Bytes = a.TokenStates.Elems() * 4
	a.Layout, a.BetaLogits, a.NegEigval, a.L2Norm = LayoutVK, true, true, true
	a.GateInKernel = true
	a.ALog = Tensor{Ptr: 1 << 53, Bytes: 8, Dtype: dtype.FP32, Shape: []int{2}}
	a.DtBias = Tensor{Ptr: 1<<53 + 8, Bytes: 8, Dtype: dtype.FP32, Shape: []int{2}}
	if d, err := ValidateDecode(a); err != nil || !d.HasTokenStates {
		t.Fatalf("every option: %+v, %v", d, err)
	}
	a = testDecode(3, 1, 1, 1)
	packed(a, 1, 8, 5)
	if d, err := ValidateDecode(a); err != nil || d.N != 3 || d.SeqlensDtype != dtype.Int64 {
		t.Fatalf("packed: %+v, %v", d, err)
	}
}

// Every rule of docs/SPEC.md's bad input that concerns decode gets an
// error naming its argument.
func TestValidateDecodeBadInput(t *testing.T) {
	hv2 := func(p uintptr) Tensor { return Tensor{Ptr: p, Bytes: 8, Dtype: dtype.FP32, Shape: []int{2}} }
	cases := []struct {
		name string
		edit func(a *Decode)
		arg  string
		want string
	}{
		{"nil q", func(a *Decode) { a.Q.Ptr = 0 }, "q", "nil device pointer"},
		{"q rank", func(a *Decode) { a.Q.Shape = []int{4, 2, 1} }, "q", "rank 3"},
		{"head dim", func(a *Decode) { a.Q.Shape = []int{4, 2, 1, 64} }, "q", "head dimension 64"},
		{"fp32 q", func(a *Decode) { a.Q.Dtype, a.K.Dtype = dtype.FP32, dtype.FP32 }, "q", "bf16 or fp16"},
		{"Hv not a multiple", func(a *Decode) { a.Q.Shape[2], a.V.Shape[2] = 2, 3 }, "v", "multiple"},
		{"T above 8", func(a *Decode) {
			for _, x := range []*Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.O} {
				x.Shape[1] = 9
			}
		}, "T", "1 to 8"},
		{"v dtype", func(a *Decode) { a.V.Dtype = dtype.FP16 }, "v", "want bf16"},
		{"k shape", func(a *Decode) { a.K.Shape = []int{4, 2, 2, HeadDim} }, "k", "shape"},
		{"g dtype", func(a *Decode) { a.G.Dtype = dtype.BF16 }, "g", "fp32"},
		{"beta dtype", func(a *Decode) { a.Beta.Dtype = dtype.FP16 }, "beta", "fp32 or bf16"},
		{"o misaligned", func(a *Decode) { a.O.Ptr += 8 }, "o", "16-byte aligned"},
		{"o short", func(a *Decode) { a.O.Bytes-- }, "o", "bytes"},
		{"a_log without gate", func(a *Decode) { a.ALog = hv2(1 << 53) }, "a_log", "GateInKernel is off"},
		{"gate without a_log", func(a *Decode) { a.GateInKernel = true }, "a_log", "want fp32"},
		{"gate without dt_bias", func(a *Decode) { a.GateInKernel, a.ALog = true, hv2(1<<53) }, "dt_bias", "want fp32"},
		{"neg_eigval alone", func(a *Decode) { a.NegEigval = true }, "neg_eigval", "BetaLogits"},
		{"layout", func(a *Decode) { a.Layout = 2 }, "state_layout", "want [K,V]"},
		{"no pool", func(a *Decode) { a.Pool = Pool{} }, "pool", "always runs from a state pool"},
		{"pool without table", func(a *Decode) { a.Pool.Slots, a.Pool.SlotsDevice = nil, Tensor{} }, "slots", "missing"},
		{"table without pool", func(a *Decode) { a.Pool.States = Tensor{} }, "pool", "missing"},
		{"pool fp16", func(a *Decode) { a.Pool.States.Dtype = dtype.FP16 }, "pool", "fp32 or bf16"},
		{"pool Hv", func(a *Decode) { a.Pool.States.Shape = []int{8, 1, HeadDim, HeadDim} }, "pool", "want [S, 2, 128, 128]"},
		{"slot out of range", func(a *Decode) { a.Pool.Slots[1] = 8 }, "slots", "out of range"},
		{"duplicate slots", func(a *Decode) { a.Pool.Slots[1] = a.Pool.Slots[0] }, "slots", "both write slot"},
		{"table length", func(a *Decode) { a.Pool.Slots = a.Pool.Slots[:3] }, "slots", "3 entries for 4 sequences"},
		{"device table dtype", func(a *Decode) { a.Pool.SlotsDevice.Dtype = dtype.Int64 }, "slots (device)", "int32"},
		{"token_states dtype", func(a *Decode) {
			a.TokenStates = Tensor{Ptr: 1 << 52, Bytes: 8 * 2 << 16, Dtype: dtype.BF16, Shape: []int{8, 2, HeadDim, HeadDim}}
		}, "token_states", "want fp32"},
		{"token_states shape", func(a *Decode) {
			a.TokenStates = Tensor{Ptr: 1 << 52, Bytes: 4 * 4 * 2 << 16, Dtype: dtype.FP32, Shape: []int{4, 2, HeadDim, HeadDim}}
		}, "token_states", "shape"},
		{"token_states on q", func(a *Decode) {
			a.TokenStates = Tensor{Ptr: a.Q.Ptr - 64, Bytes: 8 * 2 << 16 * 4, Dtype: dtype.FP32, Shape: []int{8, 2, HeadDim, HeadDim}}
		}, "token_states", "shares memory with q"},
		{"token_states on o", func(a *Decode) {
			a.TokenStates = Tensor{Ptr: a.O.Ptr - 64, Bytes: 8 * 2 << 16 * 4, Dtype: dtype.FP32, Shape: []int{8, 2, HeadDim, HeadDim}}
		}, "token_states", "shares memory with o"},
		{"o on v", func(a *Decode) { a.O.Ptr = a.V.Ptr + 16 }, "o", "shares memory with v"},
		{"o on slots", func(a *Decode) { a.O.Ptr = a.Pool.SlotsDevice.Ptr - 16 }, "o", "shares memory with slots (device)"},
		{"pool on beta", func(a *Decode) { a.Beta.Ptr = a.Pool.States.Ptr + 4096 }, "pool", "shares memory with beta"},
		{"pool on o", func(a *Decode) { a.O.Ptr = a.Pool.States.Ptr + 4096 }, "pool", "shares memory with o"},
		{"pool on slots", func(a *Decode) { a.Pool.SlotsDevice.Ptr = a.Pool.States.Ptr + 4096 }, "pool", "shares memory with slots"},
		{"pool on a_log", func(a *Decode) {
			a.GateInKernel, a.ALog, a.DtBias = true, hv2(a.Pool.States.Ptr+64), hv2(1<<53)
		}, "pool", "shares memory with a_log"},
		{"scale", func(a *Decode) { a.Scale = float32(math.Inf(1)) }, "scale", "not finite"},
		{"device cu_seqlens alone", func(a *Decode) {
			a.CuSeqlensDevice = Tensor{Ptr: 1 << 50, Bytes: 40, Dtype: dtype.Int64, Shape: []int{5}}
		}, "cu_seqlens", "host copy"},
	}
	for _, c := range cases {
		a := testDecode(4, 2, 1, 2)
		c.edit(a)
		_, err := ValidateDecode(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.want) || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error naming %q with %q", c.name, err, c.arg, c.want)
		}
	}
	if _, err := ValidateDecode(nil); err == nil {
		t.Error("nil accepted")
	}
}

// Packed sequences: each of 1 to 8 tokens, named by cu_seqlens.
func TestValidateDecodePacked(t *testing.T) {
	for _, c := range []struct {
		lens []int
		want string
	}{
		{[]int{3, 0, 2}, "sequence 1 has 0 tokens"},
		{[]int{8, 9}, "sequence 1 has 9 tokens"},
	} {
		a := testDecode(3, 1, 1, 2)
		packed(a, c.lens...)
		_, err := ValidateDecode(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != "cu_seqlens" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want cu_seqlens with %q", c.lens, err, c.want)
		}
	}
	a := testDecode(3, 1, 1, 2)
	packed(a, 4, 4, 1)
	a.CuSeqlens[1] = 5 // the packed batch of 9 tokens still ends at 9
	if _, err := ValidateDecode(a); err != nil {
		t.Errorf("5+3+1: %v", err)
	}
	a.CuSeqlensDevice.Dtype = dtype.FP32
	if _, err := ValidateDecode(a); err == nil || !strings.Contains(err.Error(), "cu_seqlens (device)") {
		t.Errorf("fp32 device cu_seqlens: %v", err)
	}
}

// A valid call is validated without allocating (Decode validates every
// call).
func TestValidateDecodeAllocs(t *testing.T) {
	a := testDecode(256, 4, 16, 32)
	a.TokenStates = Tensor{Ptr: 1 << 52, Dtype: dtype.FP32, Shape: []int{1024, 32, HeadDim, HeadDim}}
	a.TokenStates.Bytes = a.TokenStates.Elems() * 4
	if _, err := ValidateDecode(a); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = ValidateDecode(a) }); n != 0 {
		t.Errorf("ValidateDecode allocates %v times a call, want 0", n)
	}
	b := testDecode(3, 1, 1, 2)
	packed(b, 8, 1, 7)
	if n := testing.AllocsPerRun(20, func() { _, _ = ValidateDecode(b) }); n != 0 {
		t.Errorf("packed: ValidateDecode allocates %v times a call, want 0", n)
	}
}
