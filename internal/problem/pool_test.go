package problem

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

func testPool(s, hv int, slots []int) Pool {
	st := Tensor{Ptr: 1 << 20, Dtype: dtype.FP32, Shape: []int{s, hv, HeadDim, HeadDim}}
	st.Bytes = st.Elems() * 4
	return Pool{States: st, Slots: slots, SlotsDevice: Tensor{Ptr: 1 << 40, Bytes: 4 * len(slots), Dtype: dtype.Int32, Shape: []int{len(slots)}}}
}

func TestCheckPool(t *testing.T) {
	ok := testPool(8, 4, []int{3, -1, 0, -1, 7})
	info, err := CheckPool(ok, 5, 4)
	if err != nil || info.S != 8 || info.Dtype != dtype.FP32 || info.StateBytes(4) != 4*128*128*4 {
		t.Fatalf("valid pool: %+v, %v", info, err)
	}
	bf := testPool(8, 4, []int{1})
	bf.States.Dtype = dtype.BF16
	if info, err := CheckPool(bf, 1, 4); err != nil || info.Dtype != dtype.BF16 {
		t.Fatalf("bf16 pool: %+v, %v", info, err)
	}
	cases := []struct {
		name string
		edit func(p *Pool)
		n    int
		arg  string
		want string
	}{
		{"no states", func(p *Pool) { p.States = Tensor{} }, 5, "pool", "missing"},
		{"fp16", func(p *Pool) { p.States.Dtype = dtype.FP16 }, 5, "pool", "fp32 or bf16"},
		{"wrong Hv", func(p *Pool) { p.States.Shape = []int{8, 2, 128, 128} }, 5, "pool", "want [S, 4, 128, 128]"},
		{"short", func(p *Pool) { p.States.Bytes-- }, 5, "pool", "bytes"},
		{"no table", func(p *Pool) { p.Slots = nil }, 5, "slots", "missing"},
		{"table length", func(p *Pool) {}, 4, "slots", "5 entries for 4 sequences"},
		{"no device table", func(p *Pool) { p.SlotsDevice = Tensor{} }, 5, "slots (device)", "missing"},
		{"int64 table", func(p *Pool) { p.SlotsDevice.Dtype = dtype.Int64 }, 5, "slots (device)", "int32"},
		{"out of range", func(p *Pool) { p.Slots = []int{3, -1, 8, -1, 7} }, 5, "slots", "slot 8 is out of range"},
		{"duplicate", func(p *Pool) { p.Slots = []int{3, -1, 7, -1, 7} }, 5, "slots", "sequences 2 and 4 both write slot 7"},
	}
	for _, c := range cases {
		p := testPool(8, 4, []int{3, -1, 0, -1, 7})
		c.edit(&p)
		_, err := CheckPool(p, c.n, 4)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q with %q", c.name, err, c.arg, c.want)
		}
	}
}

func TestCheckPoolAllocs(t *testing.T) {
	slots := make([]int, 1024)
	for i := range slots {
		slots[i] = 1023 - i
	}
	p := testPool(2048, 16, slots)
	if _, err := CheckPool(p, len(slots), 16); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = CheckPool(p, len(slots), 16) }); n != 0 {
		t.Errorf("CheckPool allocates %v times a call, want 0", n)
	}
}

func TestCheckLayout(t *testing.T) {
	for _, l := range []Layout{LayoutKV, LayoutVK} {
		if err := CheckLayout(l); err != nil {
			t.Errorf("%v: %v", l, err)
		}
	}
	if err := CheckLayout(2); err == nil || !strings.Contains(err.Error(), "state_layout") {
		t.Errorf("layout 2: %v", err)
	}
	if LayoutVK.String() != "[V,K]" || Layout(7).String() != "Layout(7)" {
		t.Errorf("names: %v %v", LayoutVK, Layout(7))
	}
}

func TestCheckPoolApart(t *testing.T) {
	p := testPool(2, 1, []int{0})
	in := span{p.States.Ptr + 100, 4}
	if err := checkPoolApart(p, []string{"q", "o"}, []span{{}, in}); err == nil || !strings.Contains(err.Error(), "shares memory with o") {
		t.Errorf("overlap: %v", err)
	}
	if err := checkPoolApart(p, []string{"q"}, []span{{p.States.Ptr + uintptr(p.States.Bytes), 8}}); err != nil {
		t.Errorf("adjacent: %v", err)
	}
}
