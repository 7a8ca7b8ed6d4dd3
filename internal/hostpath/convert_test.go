package hostpath

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// edgeFloats are float32 values where rounding to 16 bits has a special
// case: signed zeros, Inf, NaNs (quiet, signalling, payload only in the
// low bits), float32 subnormals, the fp16 subnormal and overflow
// boundaries and bf16's, and ties either way.
func edgeFloats() []float32 {
	bits := []uint32{
		0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,
		0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F80FFFF, 0x7F810000, 0xFFFF8000, 0xFFFF7FFF,
		0x00000001, 0x80000001, 0x00007FFF, 0x00008000, 0x00018000, 0x007FFFFF, 0x00800000,
		0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001, 0x3F808000, 0x3F818000,
		0x33000000, 0x33000001, 0xB3000000, 0x337FFFFF, 0x33C00000, 0x38800000, 0x387FFFFF,
		0x387FC000, 0x387FE000, 0x38000000, 0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FFFFF,
		0x47800000, 0xC77FF000, 0x3F801000, 0x3F803000, 0x3F800FFF,
	}
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = math.Float32frombits(b)
	}
	return out
}

// checkRound compares a block rounding with its scalar reference on src.
func checkRound(t *testing.T, name string, block func([]uint16, []float32), scalar func(float32) uint16, src []float32) bool {
	t.Helper()
	dst := make([]uint16, len(src))
	block(dst, src)
	for i, x := range src {
		if want := scalar(x); dst[i] != want {
			t.Errorf("%s(%#08x) = %#04x, want %#04x", name, math.Float32bits(x), dst[i], want)
			return false
		}
	}
	return true
}

// The block roundings agree bit for bit with dtype's scalar ones on the
// edge values, on every float32 whose low 16 bits are a rounding boundary
// (all signs, exponents and top mantissa bits), and on every 31st float32
// (-short: every 997th); GDN_EXHAUSTIVE=1 checks all 2^32 (about 15 s on
// two cores).
func TestRoundBlocksMatchDtype(t *testing.T) {
	for _, c := range []struct {
		name   string
		block  func([]uint16, []float32)
		scalar func(float32) uint16
	}{
		{"bf16", roundBF16s, dtype.RoundBF16},
		{"fp16", roundFP16s, dtype.RoundFP16},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !checkRound(t, c.name, c.block, c.scalar, edgeFloats()) {
				return
			}
			var bounds []float32
			for hi := range uint32(1 << 16) {
				for _, lo := range []uint32{0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000, 0x7FFF, 0x8000, 0x8001, 0xE000, 0xFFFF} {
					bounds = append(bounds, math.Float32frombits(hi<<16|lo))
				}
			}
			if !checkRound(t, c.name, c.block, c.scalar, bounds) {
				return
			}
			stride := uint64(31)
			switch {
			case os.Getenv("GDN_EXHAUSTIVE") == "1":
				stride = 1
			case testing.Short():
				stride = 997
			}
			const span = 1 << 16 // values per block call
			var next atomic.Uint64
			var failed atomic.Bool
			var wg sync.WaitGroup
			for range runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					src := make([]float32, span)
					dst := make([]uint16, span)
					for !failed.Load() {
						base := next.Add(span*stride) - span*stride
						if base >= 1<<32 {
							return
						}
						n := 0
						for b := base; b < base+span*stride && b < 1<<32; b += stride {
							src[n] = math.Float32frombits(uint32(b))
							n++
						}
						c.block(dst[:n], src[:n])
						for i, x := range src[:n] {
							if want := c.scalar(x); dst[i] != want {
								failed.Store(true)
								t.Errorf("%s(%#08x) = %#04x, want %#04x", c.name, math.Float32bits(x), dst[i], want)
								return
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// The block widenings agree bit for bit (NaN payloads included) with
// dtype's scalar ones on every 16-bit pattern.
func TestWidenBlocksMatchDtype(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, c := range []struct {
		name   string
		block  func([]float32, []uint16)
		scalar func(uint16) float32
	}{
		{"bf16", widenBF16s, dtype.BF16ToFloat32},
		{"fp16", widenFP16s, dtype.FP16ToFloat32},
	} {
		dst := make([]float32, len(src))
		c.block(dst, src)
		for i, h := range src {
			if got, want := math.Float32bits(dst[i]), math.Float32bits(c.scalar(h)); got != want {
				t.Fatalf("%s(%#04x) = %#08x, want %#08x", c.name, h, got, want)
			}
		}
	}
}

// A run converts every element of every piece exactly once; ready comes
// once per piece, before any of its work, and done once, after all of it;
// a piece whose ready fails is not converted and the run returns the error.
func TestConvRun(t *testing.T) {
	sizes := []int{0, 1, taskElems - 1, taskElems, 5*taskElems + 3, 40 * taskElems}
	var pieces []convPiece
	for slot, n := range sizes {
		step := 3*taskElems + 7 // pieces cut across tasks
		for lo := 0; lo < n; lo += step {
			pieces = append(pieces, convPiece{slot: slot, lo: lo, hi: min(lo+step, n)})
		}
	}
	bad := len(pieces) / 2
	boom := errors.New("boom")
	seen := make([][]int32, len(sizes))
	for i, n := range sizes {
		seen[i] = make([]int32, n)
	}
	readies := make([]atomic.Int32, len(pieces))
	dones := make([]atomic.Int32, len(pieces))
	works := make([]atomic.Int32, len(pieces))
	r := &convRun{
		pieces: pieces,
		ready: func(p int) error {
			if readies[p].Add(1) != 1 || works[p].Load() != 0 {
				t.Errorf("piece %d: ready again or after its work", p)
			}
			if p == bad {
				return boom
			}
			return nil
		},
		work: func(p *convPiece, lo, hi int) {
			i := 0 // p is &pieces[i]
			for &pieces[i] != p {
				i++
			}
			if readies[i].Load() != 1 || dones[i].Load() != 0 || lo < p.lo || hi > p.hi {
				t.Errorf("piece %d: work [%d,%d) before ready, after done or outside [%d,%d)", i, lo, hi, p.lo, p.hi)
			}
			works[i].Add(1)
			for e := lo; e < hi; e++ {
				atomic.AddInt32(&seen[p.slot][e], 1)
			}
		},
		done: func(p int) {
			if dones[p].Add(1) != 1 {
				t.Errorf("piece %d done twice", p)
			}
		},
	}
	if err := r.run(); !errors.Is(err, boom) {
		t.Errorf("run = %v, want the failed ready's error", err)
	}
	for i, p := range pieces {
		want := int32(1)
		if i == bad {
			want = 0
		}
		if readies[i].Load() != 1 || dones[i].Load() != 1 {
			t.Errorf("piece %d: %d readies, %d dones, want 1 each", i, readies[i].Load(), dones[i].Load())
		}
		for e := p.lo; e < p.hi; e++ {
			if c := seen[p.slot][e]; c != want {
				t.Fatalf("piece %d: element %d of tensor %d converted %d times, want %d", i, e, p.slot, c, want)
			}
		}
	}
}

// Whole tensors through encodeRange and decodeRange in a run, pieces cut
// small: every value comes back as the scalar round trip gives it.
func TestEncodeDecodeRuns(t *testing.T) {
	src := make([]float32, 3*taskElems+5)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 100)
	}
	copy(src, edgeFloats())
	for _, dt := range []dtype.Dtype{dtype.BF16, dtype.FP16, dtype.FP32} {
		buf := make([]byte, len(src)*dt.Size())
		pieces := []convPiece{{lo: 0, hi: 1000}, {lo: 1000, hi: 2 * taskElems}, {lo: 2 * taskElems, hi: len(src)}}
		(&convRun{pieces: pieces, work: func(_ *convPiece, lo, hi int) { encodeRange(buf, dt, src, lo, hi) }}).run()
		got := make([]float32, len(src))
		(&convRun{pieces: pieces, work: func(_ *convPiece, lo, hi int) { decodeRange(got, buf, dt, lo, hi) }}).run()
		for i, v := range src {
			want := v
			switch dt {
			case dtype.BF16:
				want = dtype.BF16ToFloat32(dtype.RoundBF16(v))
			case dtype.FP16:
				want = dtype.FP16ToFloat32(dtype.RoundFP16(v))
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
				t.Fatalf("%v: element %d (%#08x) = %#08x, want %#08x", dt, i, math.Float32bits(v), math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
	}
}

// cutPieces covers every floating-point tensor with pieces of at most the
// given bytes, in order, at the right offsets, and leaves cu_seqlens out.
func TestCutPieces(t *testing.T) {
	h := layoutArgs()
	l, err := NewCoreLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	const maxBytes = 1000
	ps := cutPieces(l.in, maxBytes)
	covered := make([]int, len(l.in))
	for _, p := range ps {
		s := l.in[p.slot]
		size := s.t.Dtype.Size()
		if s.ints != nil || p.bytes > maxBytes || p.lo != covered[p.slot] || p.off != s.off+p.lo*size || p.bytes != (p.hi-p.lo)*size {
			t.Fatalf("piece %+v of a %v tensor at %d", p, s.t.Dtype, s.off)
		}
		covered[p.slot] = p.hi
	}
	for i, s := range l.in {
		if want := s.t.Elems(); s.ints == nil && covered[i] != want {
			t.Errorf("tensor %d: pieces cover %d of %d elements", i, covered[i], want)
		}
	}
}

// prefillBenchArgs is the batch of examples/prefill as host arguments:
// 4 packed sequences, 7,896 tokens, Hq 16, Hv 32, bf16, h0 and ht, values
// from benchFloats.
func prefillBenchArgs() *CoreArgs {
	const T, hq, hv, n = 7896, 16, 32, 4
	return &CoreArgs{B: 1, T: T, Hq: hq, Hv: hv, Dtype: dtype.BF16, CuSeqlens: []int{0, 4096, 5096, 7596, 7896}, FinalState: true,
		Q: benchFloats(T * hq * 128), K: benchFloats(T * hq * 128), V: benchFloats(T * hv * 128),
		G: benchFloats(T * hv), Beta: benchFloats(T * hv), A: benchFloats(T * hv * 64),
		H0: benchFloats(n * hv * 128 * 128)}
}

// benchFloats returns n values of the recipe's scale (normal, no
// specials): the inputs the conversions see in practice.
func benchFloats(n int) []float32 {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// BenchmarkConvert times each element conversion over 16M elements (64 MB
// of float32, beyond the caches), on one goroutine (serial) and through a
// run on every core (parallel, as ForwardHost converts; -cpu to vary), and
// reports ns/elem. scalar-bf16 is the per-element dtype.RoundBF16 loop the
// conversion replaced, for comparison.
func BenchmarkConvert(b *testing.B) {
	const n = 1 << 24
	src := benchFloats(n)
	half := make([]uint16, n)
	roundBF16s(half, src)
	wide := make([]float32, n)
	for _, c := range []struct {
		name string
		fn   func(lo, hi int)
	}{
		{"round-bf16", func(lo, hi int) { roundBF16s(half[lo:hi], src[lo:hi]) }},
		{"round-fp16", func(lo, hi int) { roundFP16s(half[lo:hi], src[lo:hi]) }},
		{"widen-bf16", func(lo, hi int) { widenBF16s(wide[lo:hi], half[lo:hi]) }},
		{"widen-fp16", func(lo, hi int) { widenFP16s(wide[lo:hi], half[lo:hi]) }},
		{"copy-fp32", func(lo, hi int) { copy(wide[lo:hi], src[lo:hi]) }},
		{"scalar-bf16", func(lo, hi int) {
			for i := lo; i < hi; i++ {
				half[i] = dtype.RoundBF16(src[i])
			}
		}},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			for b.Loop() {
				c.fn(0, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			r := &convRun{pieces: cutPieces([]layoutSlot{{t: &problem.Tensor{Dtype: dtype.FP32, Shape: []int{n}}}}, pieceBytes*2),
				work: func(_ *convPiece, lo, hi int) { c.fn(lo, hi) }}
			for b.Loop() {
				r.run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
		})
	}
}

// BenchmarkHostCall is the host side of a repeated ForwardHost call on the
// batch of examples/prefill (7,896 tokens, Hq 16, Hv 32, bf16, h0 and ht),
// without the device: encode converts the inputs into a staging block
// (204 MB), decode widens o and ht from it (73 MB) into fresh result
// slices (ForwardHost) or into the same ones every call (ForwardHostInto),
// and call is encode plus decode/reuse. On every core (-cpu to vary); it
// reports ms/call.
func BenchmarkHostCall(b *testing.B) {
	l, err := NewCoreLayout(prefillBenchArgs())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, l.total)
	l.encodeInputs(buf) // and some outputs: any bits decode
	copy(buf[l.inBytes:], buf[:l.total-l.inBytes])
	ms := func(b *testing.B) { b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/call") }
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(l.inBytes))
		for b.Loop() {
			l.encodeInputs(buf)
		}
		ms(b)
	})
	b.Run("decode/fresh", func(b *testing.B) {
		b.SetBytes(int64(l.total - l.inBytes))
		for b.Loop() {
			l.decodeOutputs(buf, &Result{})
		}
		ms(b)
	})
	res := &Result{}
	b.Run("decode/reuse", func(b *testing.B) {
		b.SetBytes(int64(l.total - l.inBytes))
		for b.Loop() {
			l.decodeOutputs(buf, res)
		}
		ms(b)
	})
	b.Run("call/reuse", func(b *testing.B) {
		b.SetBytes(int64(l.total))
		for b.Loop() {
			l.encodeInputs(buf)
			l.decodeOutputs(buf, res)
		}
		ms(b)
	})
}
