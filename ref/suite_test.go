package ref

import (
	"math"
	"testing"
)

func TestSuite(t *testing.T) {
	if len(Suite) != 14 {
		t.Fatalf("Suite has %d cases, want the 14 of docs/BENCH.md", len(Suite))
	}
	seen := map[string]bool{}
	for _, c := range Suite {
		if seen[c.Name] {
			t.Errorf("duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
		s := c.Shape()
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		if s.N() != len(c.Lens) || (len(c.Lens) == 1) != (s.CuSeqlens == nil) {
			t.Errorf("%s: N %d, CuSeqlens %v for %d sequences", c.Name, s.N(), s.CuSeqlens, len(c.Lens))
		}
		if !(c.FLOPs() > 0 && c.MinBytes(2) > 0 && c.FloorMs() > 0 && c.Floor() > 0) {
			t.Errorf("%s: FLOPs %v bytes %v floor %v, want positive", c.Name, c.FLOPs(), c.MinBytes(2), c.FloorMs())
		}
		got, ok := CaseByName(c.Name)
		if !ok || got.Name != c.Name || got.Hq != c.Hq || got.Hv != c.Hv || len(got.Lens) != len(c.Lens) {
			t.Errorf("CaseByName(%q) = %+v, %v", c.Name, got, ok)
		}
	}
	if _, ok := CaseByName("no_such_case"); ok {
		t.Errorf("CaseByName found a case that does not exist")
	}

	c, _ := CaseByName("tp8_2k")
	if want := 2048 * (8*131072 + 2*32768.0); c.FLOPs() != want {
		t.Errorf("tp8_2k FLOPs = %v, want %v", c.FLOPs(), want)
	}
	// Bytes by hand: q, k (2 heads) and v, o (8 heads) at 2 B, g and beta at
	// 4 B, h0 and ht in fp32.
	if want := 2048*(2*2*128*2+2*8*128*2+8*8) + 2*8*128*128*4.0; c.MinBytes(2) != want {
		t.Errorf("tp8_2k MinBytes(2) = %v, want %v", c.MinBytes(2), want)
	}

	// Floors against anchors/roofline_vs_anchors.csv (rounded to 1e-4 ms).
	for name, want := range map[string]float64{"tp8_32k": 0.0462, "tp8_2k": 0.0029, "tp4_32k": 0.0924, "tp2_32k": 0.1848} {
		c, _ := CaseByName(name)
		if got := c.FloorMs(); math.Abs(got-want) > 5e-5 {
			t.Errorf("%s: FloorMs %.5f, anchors file says %.4f", name, got, want)
		}
	}

	s := Suite[len(Suite)-1].Shape()
	if s.Tokens() != 7000+33+1+4096+511+2048+64+129 || s.CuSeqlens[2] != 7033 {
		t.Errorf("varlen_mix shape %+v", s)
	}
	// CaseByName hands out a copy: editing it leaves Suite alone.
	c, _ = CaseByName("varlen_mix")
	c.Lens[0] = 1
	if Suite[len(Suite)-1].Lens[0] != 7000 {
		t.Errorf("editing CaseByName's result changed Suite")
	}
}
