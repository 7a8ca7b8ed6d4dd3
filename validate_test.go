package gdn

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/kernsrc"
)

// goodArgs returns valid core arguments for B, T, Hq, Hv with fake (but
// aligned, non-nil, large enough) device pointers: validation never touches
// device memory.
func goodArgs(b, t, hq, hv int) *CoreArgs {
	next := uintptr(1 << 20)
	tensor := func(dt Dtype, shape ...int) Tensor {
		tn := Tensor{Ptr: next, Dtype: dt, Shape: shape}
		tn.Bytes = tn.Elems() * dt.Size()
		next += uintptr(tn.Bytes+255) &^ 255
		return tn
	}
	return &CoreArgs{
		Q: tensor(BF16, b, t, hq, 128), K: tensor(BF16, b, t, hq, 128), V: tensor(BF16, b, t, hv, 128),
		G: tensor(FP32, b, t, hv), Beta: tensor(FP32, b, t, hv), A: tensor(FP32, b, t, hv, 64),
		H0: tensor(FP32, b, hv, 128, 128), O: tensor(BF16, b, t, hv, 128), Ht: tensor(FP32, b, hv, 128, 128),
	}
}

func TestValidateCoreAccepts(t *testing.T) {
	a := goodArgs(3, 65, 8, 24)
	p, err := ValidateCore(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.B != 3 || p.T != 65 || p.Hq != 8 || p.Hv != 24 || p.N != 3 || p.G() != 3 || !p.HasH0 || !p.HasHt {
		t.Fatalf("problem %+v", p)
	}
	if want := float32(1 / math.Sqrt(128)); p.Scale != want {
		t.Fatalf("default scale %v, want %v", p.Scale, want)
	}
	// Optional tensors absent, beta in the input dtype, A in bf16, varlen.
	v := goodArgs(1, 100, 2, 8)
	v.H0, v.Ht = Tensor{}, Tensor{}
	v.Beta.Dtype, v.A.Dtype = BF16, BF16
	v.CuSeqlens = []int{0, 0, 1, 60, 60, 100}
	v.CuSeqlensDevice = Tensor{Ptr: 1 << 40, Bytes: 48, Dtype: Int64, Shape: []int{6}}
	p, err = ValidateCore(v)
	if err != nil {
		t.Fatal(err)
	}
	if p.N != 5 || p.HasH0 || p.HasHt || p.SeqlensDtype != Int64 {
		t.Fatalf("varlen problem %+v", p)
	}
}

func TestValidateCoreRejects(t *testing.T) {
	cases := []struct {
		arg, want string
		mutate    func(a *CoreArgs)
	}{
		{"args", "nil", nil},
		{"q", "rank 3", func(a *CoreArgs) { a.Q.Shape = []int{2, 10, 128} }},
		{"q", "head dimension 64", func(a *CoreArgs) { a.Q.Shape = []int{2, 10, 2, 64} }},
		{"q", "dtype fp32", func(a *CoreArgs) { a.Q.Dtype = FP32 }},
		{"q", "at least 1", func(a *CoreArgs) { a.Q.Shape = []int{2, 0, 2, 128} }},
		{"v", "multiple", func(a *CoreArgs) { a.V.Shape = []int{2, 10, 3, 128} }},
		{"v", "rank", func(a *CoreArgs) { a.V.Shape = []int{2, 10, 8} }},
		{"k", "shape", func(a *CoreArgs) { a.K.Shape = []int{2, 10, 4, 128} }},
		{"k", "dtype", func(a *CoreArgs) { a.K.Dtype = FP16 }},
		{"v", "nil device pointer", func(a *CoreArgs) { a.V.Ptr = 0 }},
		{"o", "aligned", func(a *CoreArgs) { a.O.Ptr += 2 }},
		{"g", "dtype bf16", func(a *CoreArgs) { a.G.Dtype = BF16 }},
		{"beta", "bytes", func(a *CoreArgs) { a.Beta.Bytes = 4 }},
		{"beta", "dtype fp16", func(a *CoreArgs) { a.Beta.Dtype = FP16 }},
		{"A", "shape", func(a *CoreArgs) { a.A.Shape = []int{2, 10, 8, 128} }},
		{"h0", "shape", func(a *CoreArgs) { a.H0.Shape = []int{3, 8, 128, 128} }},
		{"ht", "dtype", func(a *CoreArgs) { a.Ht.Dtype = BF16 }},
		{"ht", "nil device pointer", func(a *CoreArgs) { a.Ht.Ptr = 0 }},
		{"cu_seqlens", "B = 1", func(a *CoreArgs) { a.CuSeqlens = []int{0, 20} }},
		{"scale", "finite", func(a *CoreArgs) { a.Scale = float32(math.Inf(1)) }},
	}
	for _, c := range cases {
		var a *CoreArgs
		if c.mutate != nil {
			a = goodArgs(2, 10, 2, 8)
			c.mutate(a)
		}
		_, err := ValidateCore(a)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s/%s: got %v, want an ArgError for %q", c.arg, c.want, err, c.arg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.arg, err, c.want)
		}
	}
}

func TestValidateCuSeqlens(t *testing.T) {
	cases := []struct {
		cu   []int
		want string
	}{
		{[]int{1, 100}, "starts at 1"},
		{[]int{0, 50, 40, 100}, "decreases at index 2"},
		{[]int{0, 99}, "ends at 99"},
		{[]int{0}, "at least 2"},
	}
	for _, c := range cases {
		a := goodArgs(1, 100, 2, 8)
		a.H0, a.Ht = Tensor{}, Tensor{}
		a.CuSeqlens = c.cu
		a.CuSeqlensDevice = Tensor{Ptr: 1 << 40, Bytes: 4 * len(c.cu), Dtype: Int32, Shape: []int{len(c.cu)}}
		_, err := ValidateCore(a)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cu_seqlens") {
			t.Errorf("%v: got %v, want cu_seqlens error saying %q", c.cu, err, c.want)
		}
	}
	// The device copy must match the host copy in length and be an integer type.
	a := goodArgs(1, 100, 2, 8)
	a.H0, a.Ht = Tensor{}, Tensor{}
	a.CuSeqlens = []int{0, 40, 100}
	a.CuSeqlensDevice = Tensor{Ptr: 1 << 40, Bytes: 8, Dtype: Int32, Shape: []int{2}}
	if _, err := ValidateCore(a); err == nil || !strings.Contains(err.Error(), "cu_seqlens (device)") {
		t.Errorf("short device cu_seqlens: %v", err)
	}
	a.CuSeqlensDevice = Tensor{Ptr: 1 << 40, Bytes: 12, Dtype: FP32, Shape: []int{3}}
	if _, err := ValidateCore(a); err == nil || !strings.Contains(err.Error(), "int32 or int64") {
		t.Errorf("fp32 device cu_seqlens: %v", err)
	}
	a.CuSeqlens = nil
	if _, err := ValidateCore(a); err == nil || !strings.Contains(err.Error(), "host copy") {
		t.Errorf("device cu_seqlens without host copy: %v", err)
	}
	// h0 follows N = len(cu_seqlens)-1, not B.
	a = goodArgs(1, 100, 2, 8)
	a.CuSeqlens = []int{0, 40, 100}
	a.CuSeqlensDevice = Tensor{Ptr: 1 << 40, Bytes: 12, Dtype: Int32, Shape: []int{3}}
	if _, err := ValidateCore(a); err == nil || !strings.Contains(err.Error(), "h0") {
		t.Errorf("h0 of B sequences with 2 packed sequences: %v", err)
	}
}

func TestPlanCoreTileWidth(t *testing.T) {
	mix := []int{0, 7000, 7033, 7034, 11130, 11641, 13689, 13753, 13882} // varlen_mix
	cases := []struct {
		name          string
		n, t, hv, sms int
		seqs          []int
		bv            int
		dt            Dtype
	}{
		{"tp8_32k", 1, 32768, 8, 132, nil, 64, BF16},         // 16 CTAs: the short chain of the 64-wide tile wins
		{"q397_32k", 1, 32768, 64, 132, nil, 64, FP16},       // 128 CTAs still fit one wave
		{"tp2_16kx2", 2, 16384, 32, 132, nil, 64, BF16},      // 128 CTAs
		{"q35_4kx8", 8, 4096, 32, 132, nil, 128, BF16},       // 4 waves of 64-wide CTAs against 2 of 128-wide ones
		{"q35_1kx8", 8, 1024, 32, 132, nil, 128, BF16},       // the same at a quarter of the length
		{"sym32_8kx4", 4, 8192, 32, 132, nil, 128, BF16},     // 2 waves against 1
		{"varlen_mix", 1, 13882, 32, 132, mix, 64, BF16},     // the 7000-token sequence bounds both: the shorter chain wins
		{"tp8_2k on 14 SMs", 1, 2048, 8, 14, nil, 128, BF16}, // a MIG slice: 8 CTAs in one wave beat 16 in two
		{"empty", 1, 0, 8, 132, []int{0, 0}, 64, BF16},
	}
	for _, c := range cases {
		p := Problem{B: 1, N: c.n, T: c.t, Hq: 1, Hv: c.hv, Dtype: c.dt, Seqs: c.seqs}
		if c.seqs != nil {
			p.N = len(c.seqs) - 1
		}
		pl, err := PlanCoreSplit(p, c.sms, -1) // the unsplit plan's tile (split plans: split_test.go)
		if err != nil {
			t.Fatal(err)
		}
		if pl.TileWidth != c.bv {
			t.Errorf("%s: tile %d, want %d", c.name, pl.TileWidth, c.bv)
		}
		if want := uint32(c.hv * 128 / c.bv); pl.Grid[0] != want || pl.Grid[1] != uint32(p.N) {
			t.Errorf("%s: grid %v, want [%d %d 1]", c.name, pl.Grid, want, p.N)
		}
		if !strings.Contains(pl.Variant.Name, c.dt.String()) {
			t.Errorf("variant %s for %v", pl.Variant.Name, c.dt)
		}
		nc := c.bv / 64
		if pl.SharedBytes != kernsrc.HopperSharedBytes(coreDtype(p), nc) || pl.SharedBytes > 227<<10 {
			t.Errorf("shared bytes %d", pl.SharedBytes)
		}
		if pl.Block[0] != uint32(kernsrc.HopperThreads(coreDtype(p), nc, false)) {
			t.Errorf("block %v", pl.Block)
		}
	}
}

// The packed parameter block must match struct GdnHopperParams in
// gdn_hopper.cu: five tensor maps, then the pointers, then the scalars.
func TestPackHopperParamsLayout(t *testing.T) {
	hp := kernsrc.HopperParams{G: 0x1000, Beta: 0x2000, H0: 0x3000, Ht: 0, CuSeqlens: 0xABC000, O: 0x5000,
		ALog: 0x6000, DtBias: 0x7000, Scale: 0.5, T: 100, Hq: 2, Hv: 8, N: 1, Flags: kernsrc.HopperFlagAFP32 | kernsrc.HopperFlagSeqlensInt64, NHt: 1}
	for i := range hp.MapQ {
		hp.MapQ[i], hp.MapK[i], hp.MapV[i], hp.MapA[i], hp.MapO[i] = 1, 2, 3, 4, 5
	}
	var b [kernsrc.HopperParamsBytes]byte
	for i := range b {
		b[i] = 0xee // Pack must write every byte, the padding too
	}
	hp.Pack(&b)
	for m := 0; m < 5; m++ {
		for i := 0; i < 128; i++ {
			if b[128*m+i] != byte(m+1) {
				t.Fatalf("tensor map %d byte %d: %d", m, i, b[128*m+i])
			}
		}
	}
	want := []uintptr{0x1000, 0x2000, 0x3000, 0, 0xABC000, 0x5000, 0x6000, 0x7000}
	for i, w := range want {
		if got := uintptr(binary.LittleEndian.Uint64(b[kernsrc.HopperOffPtrs+8*i:])); got != w {
			t.Errorf("pointer %d: %#x, want %#x", i, got, w)
		}
	}
	if s := math.Float32frombits(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars:])); s != 0.5 {
		t.Errorf("scale %v", s)
	}
	ints := []int32{100, 2, 8, 1, kernsrc.HopperFlagAFP32 | kernsrc.HopperFlagSeqlensInt64, 1}
	for i, w := range ints {
		if got := int32(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars+4+4*i:])); got != w {
			t.Errorf("int field %d: %d, want %d", i, got, w)
		}
	}
	for i := kernsrc.HopperOffScalars + 28; i < len(b); i++ {
		if b[i] != 0 {
			t.Fatalf("padding byte %d: %#x", i, b[i])
		}
	}
}

func TestDtypes(t *testing.T) {
	for _, d := range []Dtype{BF16, FP16, FP32, Int32, Int64} {
		got, err := ParseDtype(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDtype(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDtype("fp8"); err == nil {
		t.Error("fp8 accepted")
	}
	if BF16.Size() != 2 || FP32.Size() != 4 || Int64.Size() != 8 || DtypeInvalid.Size() != 0 {
		t.Error("sizes")
	}
}

// Without the cuda build tag Open reports ErrNoCUDA (and never exits).
func TestOpenWithoutCUDA(t *testing.T) {
	if cudaBuilt {
		t.Skip("built with -tags cuda")
	}
	_, err := Open(Options{})
	if !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Open: %v, want ErrNoCUDA", err)
	}
}

// Sizes whose products would overflow are rejected, not wrapped around.
func TestValidateCoreHugeSizes(t *testing.T) {
	cases := []struct {
		name      string
		b, t, hq  int
		hv        int
		arg, want string
	}{
		{"B*T past int32", 2, 1 << 62, 1, 1, "q", "B*T"},
		{"B*T just past int32", 1 << 16, 1 << 15, 1, 1, "q", "B*T"},
		{"heads past the cap", 1, 10, 1<<62 + 1, 1<<62 + 1, "q", "Hq"},
		{"value heads past the cap", 1, 10, 1, 1 << 17, "v", "Hv"},
	}
	for _, c := range cases {
		a := &CoreArgs{
			Q: Tensor{Ptr: 1 << 20, Bytes: 1 << 30, Dtype: BF16, Shape: []int{c.b, c.t, c.hq, 128}},
			V: Tensor{Ptr: 1 << 21, Bytes: 1 << 30, Dtype: BF16, Shape: []int{c.b, c.t, c.hv, 128}},
		}
		_, err := ValidateCore(a)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an ArgError for %q saying %q", c.name, err, c.arg, c.want)
		}
	}
	a := goodArgs(65536, 1, 1, 1)
	if _, err := ValidateCore(a); err == nil || !strings.Contains(err.Error(), "at most 65535") {
		t.Errorf("65536 sequences: %v", err)
	}
}

// beta in a 16-bit dtype needs only 2-byte alignment; fp32 needs 4.
func TestValidateBetaAlignment(t *testing.T) {
	a := goodArgs(1, 10, 1, 1)
	a.Beta.Dtype = BF16
	a.Beta.Ptr += 2
	if _, err := ValidateCore(a); err != nil {
		t.Errorf("bf16 beta at a 2-byte boundary: %v", err)
	}
	a.Beta.Dtype = FP32
	a.Beta.Bytes = 40
	if _, err := ValidateCore(a); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Errorf("fp32 beta at a 2-byte boundary: %v", err)
	}
}

// ForwardHost names the bad field before it touches the device (a zero
// Runtime has none).
func TestForwardHostRejectsBeforeTheDevice(t *testing.T) {
	good := func() *HostCoreArgs {
		return &HostCoreArgs{B: 1, T: 2, Hq: 1, Hv: 2, Dtype: BF16,
			Q: make([]float32, 256), K: make([]float32, 256), V: make([]float32, 512),
			G: make([]float32, 4), Beta: make([]float32, 4), A: make([]float32, 256)}
	}
	cases := []struct {
		arg    string
		mutate func(h *HostCoreArgs)
	}{
		{"Hv", func(h *HostCoreArgs) { h.Hv = 3; h.Hq = 2 }},
		{"T", func(h *HostCoreArgs) { h.T = 0 }},
		{"Dtype", func(h *HostCoreArgs) { h.Dtype = FP32 }},
		{"BetaDtype", func(h *HostCoreArgs) { h.BetaDtype = Int32 }},
		{"ADtype", func(h *HostCoreArgs) { h.ADtype = FP16 }},
		{"SeqlensDtype", func(h *HostCoreArgs) { h.SeqlensDtype = FP32 }},
		{"cu_seqlens", func(h *HostCoreArgs) { h.CuSeqlens = []int{0, 3} }},
		{"v", func(h *HostCoreArgs) { h.V = h.V[:511] }},
		{"h0", func(h *HostCoreArgs) { h.H0 = make([]float32, 5) }},
	}
	for _, c := range cases {
		h := good()
		c.mutate(h)
		_, err := (&Runtime{}).ForwardHost(h)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("%s: got %v, want an ArgError naming %q", c.arg, err, c.arg)
		}
	}
	if _, err := (&Runtime{}).ForwardHost(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil args: %v", err)
	}
}

// Validation allocates nothing on valid arguments (Forward validates every
// call); only a failed check builds an error.
func TestValidateCoreAllocs(t *testing.T) {
	v := goodArgs(1, 100, 2, 8)
	v.CuSeqlens = []int{0, 0, 1, 60, 60, 100}
	v.CuSeqlensDevice = Tensor{Ptr: 1 << 40, Bytes: 24, Dtype: Int32, Shape: []int{6}}
	v.Beta.Dtype, v.Beta.Bytes, v.A.Dtype = BF16, v.Beta.Bytes/2, BF16
	v.H0, v.Ht = Tensor{}, Tensor{}
	for _, a := range []*CoreArgs{goodArgs(3, 65, 8, 24), v} {
		if _, err := ValidateCore(a); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { ValidateCore(a) }); n != 0 {
			t.Errorf("%v allocs per validation, want 0", n)
		}
	}
	bad := goodArgs(1, 10, 1, 1)
	bad.A.Shape = []int{1, 10, 1, 32}
	if _, err := ValidateCore(bad); err == nil || !strings.Contains(err.Error(), "shape [1 10 1 32], want [1 10 1 64]") {
		t.Errorf("shape error reads %v", err)
	}
	bad = goodArgs(1, 10, 1, 1)
	bad.Beta.Dtype = FP16
	if _, err := ValidateCore(bad); err == nil || !strings.Contains(err.Error(), "want fp32 or bf16") {
		t.Errorf("dtype error reads %v", err)
	}
}

// The full forward's core (CoreArgs.qkFP16): q and k are its fp16 copies,
// v and o keep the input dtype; the problem says both.
func TestValidateCoreFP16QK(t *testing.T) {
	a := goodArgs(1, 100, 2, 8)
	a.qkFP16 = true
	a.Q.Dtype, a.K.Dtype = FP16, FP16
	p, err := ValidateCore(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.Dtype != BF16 || p.QKDtype != FP16 {
		t.Errorf("dtypes %v / q, k %v, want bf16 / fp16", p.Dtype, p.QKDtype)
	}
	a.K.Dtype = BF16
	var ae *ArgError
	if _, err := ValidateCore(a); !errors.As(err, &ae) || ae.Arg != "k" {
		t.Errorf("bf16 k beside fp16 copies: %v, want an ArgError naming k", err)
	}
	plain := goodArgs(1, 100, 2, 8)
	if p, err := ValidateCore(plain); err != nil || p.QKDtype != p.Dtype {
		t.Errorf("plain call: q, k dtype %v, v %v (%v)", p.QKDtype, p.Dtype, err)
	}
}

// Outputs must not share memory with an input or with each other (the
// kernels would read what other CTAs already overwrote): each overlap is an
// ArgError naming the output and the input; ht may be h0 itself.
func TestValidateCoreOverlaps(t *testing.T) {
	state := 128 * 128 * 4
	cases := []struct {
		name     string
		mutate   func(a *CoreArgs)
		arg, msg string
	}{
		{"o is q", func(a *CoreArgs) { a.O.Ptr = a.Q.Ptr }, "o", "q"},
		{"o inside v", func(a *CoreArgs) { a.O.Ptr = a.V.Ptr + 256 }, "o", "v"},
		{"o over the end of A", func(a *CoreArgs) { a.O.Ptr = a.A.Ptr + uintptr(a.A.Bytes) - 256 }, "o", "A"},
		{"ht half a state past h0", func(a *CoreArgs) { a.Ht.Ptr = a.H0.Ptr + uintptr(state/2) }, "ht", "h0"},
		{"ht on beta", func(a *CoreArgs) { a.Ht.Ptr = a.Beta.Ptr }, "ht", "beta"},
		{"ht overlapping o", func(a *CoreArgs) { a.Ht.Ptr = a.O.Ptr + 256 }, "ht", "o"},
		{"o on cu_seqlens", func(a *CoreArgs) {
			a.CuSeqlens = []int{0, 2}
			a.CuSeqlensDevice = Tensor{Ptr: a.O.Ptr + 64, Bytes: 16, Dtype: Int64, Shape: []int{2}}
		}, "o", "cu_seqlens"},
	}
	for _, c := range cases {
		a := goodArgs(1, 2, 2, 4)
		c.mutate(a)
		_, err := ValidateCore(a)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want an ArgError for %q naming %q", c.name, err, c.arg, c.msg)
		}
	}
	// The state updated in place, and buffers that only touch, are fine.
	a := goodArgs(2, 1, 2, 4)
	a.Ht = a.H0
	if _, err := ValidateCore(a); err != nil {
		t.Errorf("ht == h0: %v", err)
	}
	a = goodArgs(2, 1, 2, 4)
	a.O.Ptr = 1 << 43
	a.Q.Ptr = a.O.Ptr - uintptr(a.Q.Bytes) // q ends where o begins
	if _, err := ValidateCore(a); err != nil {
		t.Errorf("o adjacent to q: %v", err)
	}
	// Inputs may share memory with each other (they are only read).
	a = goodArgs(2, 1, 2, 4)
	a.K = a.Q
	if _, err := ValidateCore(a); err != nil {
		t.Errorf("k == q: %v", err)
	}
}

// Hv is bounded by the grid's y dimension (the preparation and the scan run
// a row per value head): 65535 passes, 65536 is an ArgError.
func TestValidateCoreHeadBound(t *testing.T) {
	if _, err := ValidateCore(goodArgs(1, 1, 1, 65535)); err != nil {
		t.Errorf("Hv = 65535: %v", err)
	}
	_, err := ValidateCore(goodArgs(1, 1, 1, 65536))
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg != "v" || !strings.Contains(err.Error(), "65535") {
		t.Errorf("Hv = 65536: %v, want an ArgError for v", err)
	}
}
