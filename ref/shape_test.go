package ref

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestShapeAccessors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      Shape
		n      int
		seqs   [][2]int
		chunks int
	}{
		{"batch", Shape{B: 2, T: 65, Hq: 1, Hv: 2}, 2, [][2]int{{0, 65}, {65, 130}}, 4},
		{"one token", Shape{B: 1, T: 1, Hq: 1, Hv: 1}, 1, [][2]int{{0, 1}}, 1},
		{"varlen with empties", Shape{B: 1, T: 129, Hq: 2, Hv: 6, CuSeqlens: []int{0, 0, 1, 65, 129, 129}},
			5, [][2]int{{0, 0}, {0, 1}, {1, 65}, {65, 129}, {129, 129}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			if s.N() != tc.n || !slices.Equal(s.Seqs(), tc.seqs) || s.NumChunks() != tc.chunks {
				t.Errorf("N %d Seqs %v NumChunks %d, want %d %v %d", s.N(), s.Seqs(), s.NumChunks(), tc.n, tc.seqs, tc.chunks)
			}
			tok := s.B * s.T
			if s.Tokens() != tok || s.G() != s.Hv/s.Hq ||
				s.QKLen() != tok*s.Hq*D || s.VLen() != tok*s.Hv*D || s.GateLen() != tok*s.Hv ||
				s.ALen() != tok*s.Hv*C || s.StateLen() != tc.n*s.Hv*D*D {
				t.Errorf("size helpers disagree with the layouts for %+v", s)
			}
		})
	}
}

// TestBadInput checks every rejection: an error wrapping ErrShape whose
// message names the argument, and no panic (a panic fails the test).
func TestBadInput(t *testing.T) {
	good := Shape{B: 1, T: 70, Hq: 1, Hv: 2}
	in, err := Recipe(good, 1, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	gcum, _ := ChunkCumsum(good, in.G)
	A, _ := SolveA(good, in.K, in.Beta, gcum)

	// with returns a copy of in changed by f, so cases cannot leak.
	with := func(f func(*Inputs)) Inputs {
		c := in
		f(&c)
		return c
	}
	shapeErr := func(s Shape) func() error { return s.Validate }
	recurrent := func(x Inputs) func() error {
		return func() error { _, _, err := Recurrent(x); return err }
	}
	chunked := func(x Inputs, gc, a []float64) func() error {
		return func() error { _, _, err := Chunked(x, gc, a); return err }
	}
	short := func(x []float64) []float64 { return x[:len(x)-1] }

	for _, tc := range []struct {
		name string
		call func() error
		want string // the argument the message must name
	}{
		{"B zero", shapeErr(Shape{B: 0, T: 1, Hq: 1, Hv: 1}), "B:"},
		{"T zero", shapeErr(Shape{B: 1, T: 0, Hq: 1, Hv: 1}), "T:"},
		{"Hq zero", shapeErr(Shape{B: 1, T: 1, Hq: 0, Hv: 1}), "Hq:"},
		{"Hv zero", shapeErr(Shape{B: 1, T: 1, Hq: 1, Hv: 0}), "Hv:"},
		{"Hv not multiple of Hq", shapeErr(Shape{B: 1, T: 1, Hq: 2, Hv: 3}), "Hv:"},
		{"negative B", shapeErr(Shape{B: -1, T: 1, Hq: 1, Hv: 1}), "B:"},
		{"huge T", shapeErr(Shape{B: 4, T: math.MaxInt / 2, Hq: 1, Hv: 1}), "B*T"},
		{"huge heads", shapeErr(Shape{B: 1, T: math.MaxInt >> 10, Hq: 1 << 9, Hv: 1 << 9}), "too large"},
		{"huge state", shapeErr(Shape{B: math.MaxInt >> 10, T: 1, Hq: 1, Hv: 1}), "state"},
		{"cu not from 0", shapeErr(Shape{B: 1, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{1, 4}}), "cu_seqlens"},
		{"cu decreasing", shapeErr(Shape{B: 1, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{0, 3, 2, 4}}), "cu_seqlens"},
		{"cu short of B*T", shapeErr(Shape{B: 1, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{0, 3}}), "cu_seqlens"},
		{"cu past B*T", shapeErr(Shape{B: 1, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{0, 5}}), "cu_seqlens"},
		{"cu one entry", shapeErr(Shape{B: 1, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{0}}), "cu_seqlens"},
		{"cu empty", shapeErr(Shape{B: 1, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{}}), "cu_seqlens"},
		{"cu with B 2", shapeErr(Shape{B: 2, T: 4, Hq: 1, Hv: 1, CuSeqlens: []int{0, 8}}), "B = 1"},

		{"zero Inputs", recurrent(Inputs{}), "B:"},
		{"q short", recurrent(with(func(x *Inputs) { x.Q = short(x.Q) })), "q:"},
		{"k nil", recurrent(with(func(x *Inputs) { x.K = nil })), "k:"},
		{"v long", recurrent(with(func(x *Inputs) { x.V = append(slices.Clone(x.V), 0) })), "v:"},
		{"g short", recurrent(with(func(x *Inputs) { x.G = short(x.G) })), "g:"},
		{"beta short", recurrent(with(func(x *Inputs) { x.Beta = short(x.Beta) })), "beta:"},
		{"h0 short", recurrent(with(func(x *Inputs) { x.H0 = short(x.H0) })), "h0:"},
		{"scale NaN", recurrent(with(func(x *Inputs) { x.Scale = math.NaN() })), "scale:"},
		{"bad cu in Inputs", recurrent(with(func(x *Inputs) { x.Shape.CuSeqlens = []int{0, 80} })), "cu_seqlens"},

		{"Chunked q short", chunked(with(func(x *Inputs) { x.Q = short(x.Q) }), gcum, A), "q:"},
		{"Chunked g_cumsum short", chunked(in, short(gcum), A), "g_cumsum:"},
		{"Chunked A short", chunked(in, gcum, short(A)), "A:"},
		{"Chunked A nil", chunked(in, gcum, nil), "A:"},
		{"Chunked g wrong when given", chunked(with(func(x *Inputs) { x.G = short(x.G) }), gcum, A), "g:"},

		{"ChunkCumsum g short", func() error { _, err := ChunkCumsum(good, short(in.G)); return err }, "g:"},
		{"ChunkCumsum bad shape", func() error { _, err := ChunkCumsum(Shape{}, nil); return err }, "B:"},
		{"SolveA k short", func() error { _, err := SolveA(good, short(in.K), in.Beta, gcum); return err }, "k:"},
		{"SolveA beta short", func() error { _, err := SolveA(good, in.K, short(in.Beta), gcum); return err }, "beta:"},
		{"SolveA g_cumsum short", func() error { _, err := SolveA(good, in.K, in.Beta, short(gcum)); return err }, "g_cumsum:"},
		{"SolveA bad Hv", func() error { _, err := SolveA(Shape{B: 1, T: 1, Hq: 2, Hv: 3}, nil, nil, nil); return err }, "Hv:"},

		{"Recipe bad shape", func() error { _, err := Recipe(Shape{B: 1, T: 1, Hq: 3, Hv: 4}, 1, RecipeOptions{}); return err }, "Hv:"},
		{"Recipe bad dtype", func() error { _, err := Recipe(good, 1, RecipeOptions{Dtype: 7}); return err }, "opts.Dtype:"},
		{"Recipe NaN beta", func() error { _, err := Recipe(good, 1, RecipeOptions{BetaValue: Float(math.NaN())}); return err }, "opts.BetaValue:"},
		{"Recipe Inf scale", func() error { _, err := Recipe(good, 1, RecipeOptions{Scale: math.Inf(1)}); return err }, "opts.Scale:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("want an error, got nil")
			}
			if !errors.Is(err, ErrShape) {
				t.Errorf("error %q does not wrap ErrShape", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}

	// The good inputs really are good: every rejection above is the change.
	if err := in.Check(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Chunked(with(func(x *Inputs) { x.G = nil }), gcum, A); err != nil {
		t.Errorf("Chunked with G nil: %v (G is not read)", err)
	}
}

// TestInvalidShapeAccessors checks the accessors do not panic on shapes
// Validate rejects.
func TestInvalidShapeAccessors(t *testing.T) {
	for _, s := range []Shape{
		{},
		{B: -3, T: 2},
		{B: 1, T: 4, CuSeqlens: []int{}},
		{B: 1, T: 4, CuSeqlens: []int{0, 9, 2}},
	} {
		_ = s.N()
		_ = s.Seqs()
		_ = s.NumChunks()
		_ = s.G()
		_ = s.StateLen()
	}
}
