package main

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Headers NumPy 1.24 reads as a float32 array (each checked with np.load
// when this table was written): gdn reads every one the same way.
var numpyReadsHeaders = []struct {
	dict  string
	shape []int
}{
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", []int{2, 3}}, // what numpy.save writes
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", []int{6}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }", []int{2, 3}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", []int{2, 3}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", []int{6}},
	{`{"descr": "<f4", "fortran_order": False, "shape": (2,3)}`, []int{2, 3}},
	{"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", []int{2, 3}},
	{"{'descr':'<f4','fortran_order':False,'shape':(2,3)}", []int{2, 3}},
	{"  {'descr': '<f4' , 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }  ", []int{2, 3}},
	{"{'descr': u'<f4', 'fortran_order': False, 'shape': (2L, 3L)}", []int{2, 3}}, // Python 2's
	{"{'descr': '<f' '4', 'fortran_order': False, 'shape': ((2), 0x3)}", []int{2, 3}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (+2, 3), }  # a comment", []int{2, 3}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'descr': '<f4'}", []int{2, 3}},
	{"{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3)}", []int{2, 3}},
	{"{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3)}", []int{2, 3}},
	{"{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3)}", []int{2, 3}},
	{"{'descr': 'f', 'fortran_order': False, 'shape': (2, 3)}", []int{2, 3}},
	{"{'descr': 'float32', 'fortran_order': False, 'shape': (2, 3)}", []int{2, 3}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (1_2,)}", []int{12}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}", []int{0, 3}},
	{"{'descr': '<f4', 'fortran_order': False, 'shape': ()}", []int{}},
}

// Headers NumPy 1.24 refuses (checked the same way): gdn refuses them too.
var numpyRefusesHeaders = []string{
	"{'descr': '<f4', 'fortran_order': False, 'shape': 6}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': [6]}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (True,)}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (06,)}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6.0,)}",
	"{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}",
	"{'descr': '<f4', 'fortran_order': None, 'shape': (6,)}",
	"{'descr': '<f4', 'shape': (6,)}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 1: 2}",
	"{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)",
	"{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}",
	"['descr', '<f4']",
	"descr='<f4'",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x",
	"{'descr': '<f4', 'fortran_order': False, 'shape': (6,,)}",
	"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (6,)}",
	"{'descr': '<q8', 'fortran_order': False, 'shape': (6,)}",
}

func TestNpyHeadersNumPyReads(t *testing.T) {
	for _, c := range numpyReadsHeaders {
		for _, version := range []byte{1, 2, 3} {
			n := 1
			for _, d := range c.shape {
				n *= d
			}
			data := make([]byte, 4*n)
			for i := range n {
				copy(data[4*i:], []byte{0, 0, 0x80, 0x3f}) // 1.0
			}
			b := npyFile(version, c.dict+"\n", data)
			a, err := readNpy(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Errorf("v%d %s: %v", version, c.dict, err)
				continue
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = 1
			}
			if !reflect.DeepEqual(a.Shape, c.shape) || !reflect.DeepEqual(a.Data, want) {
				t.Errorf("v%d %s: shape %v data %v, want %v of ones", version, c.dict, a.Shape, a.Data, c.shape)
			}
		}
	}
}

func TestNpyHeadersNumPyRefuses(t *testing.T) {
	for _, dict := range numpyRefusesHeaders {
		b := npyFile(1, dict+"\n", make([]byte, 64))
		if a, err := readNpy(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: read as %v %v, want an error as NumPy gives", dict, a.Shape, a.descr())
		} else if !strings.HasPrefix(err.Error(), "header ") {
			t.Errorf("%s: err = %v, want one about the header", dict, err)
		}
	}
}

// testdata/numpy_dtypes.npz was written by NumPy 1.24 (np.savez, plus two
// members by numpy.lib.format.write_array in formats 2.0 and 3.0): every
// member type NumPy writes for the supported kinds, both byte orders, C
// and Fortran order. base is np.arange(6).reshape(2, 3) - 2.5.
func TestReadNumPyWrittenFile(t *testing.T) {
	m, err := readNpzFile("testdata/numpy_dtypes.npz")
	if err != nil {
		t.Fatal(err)
	}
	base := []float32{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}
	base64 := []float64{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}
	iota24 := make([]float32, 24)
	for i := range iota24 {
		iota24[i] = float32(i)
	}
	want := map[string]*npyArray{
		"f4":             {Shape: []int{2, 3}, Data: base},
		"f4_fortran":     {Shape: []int{2, 3}, Data: base},
		"f4_big":         {Shape: []int{2, 3}, Data: base, Descr: ">f4"},
		"f4_v2":          {Shape: []int{2, 3}, Data: base},
		"f4_v3":          {Shape: []int{2, 3}, Data: base},
		"f2":             {Shape: []int{2, 3}, Data: base, Descr: "<f2"},
		"f8_big_fortran": {Shape: []int{2, 3}, Data: base64, Descr: ">f8"},
		"f4_3d_fortran":  {Shape: []int{2, 3, 4}, Data: iota24},
		"u1":             {Shape: []int{3}, Data: []int32{0, 7, 255}, Descr: "|u1"},
		"i1":             {Shape: []int{3}, Data: []int32{-128, 0, 127}, Descr: "|i1"},
		"i2_big":         {Shape: []int{3}, Data: []int32{-300, 2, 32767}, Descr: ">i2"},
		"u2":             {Shape: []int{3}, Data: []int32{0, 65535, 9}, Descr: "<u2"},
		"u4":             {Shape: []int{3}, Data: []int64{0, math.MaxUint32, 9}, Descr: "<u4"},
		"i8":             {Shape: []int{3}, Data: []int64{-(1 << 62), 5, 0}},
		"u8":             {Shape: []int{3}, Data: []int64{0, math.MaxInt64, 3}, Descr: "<u8"},
		"scalar":         {Shape: []int{}, Data: []float64{0.25}},
	}
	for name, w := range want {
		if got := m[name]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
	if len(m) != len(want) {
		t.Errorf("read %d arrays, want %d", len(m), len(want))
	}
}

func TestParseNpyDescr(t *testing.T) {
	for descr, want := range map[string]string{
		"<f2": "<f4", "<f4": "<f4", ">f8": "<f8", "|u1": "<i4", "|i1": "<i4", "<i2": "<i4", ">u2": "<i4",
		"<i4": "<i4", "<u4": "<i8", "<i8": "<i8", "<u8": "<i8", "d": "<f8", "e": "<f4", "B": "<i4", "q": "<i8",
		"float64": "<f8", "uint16": "<i4", "int64": "<i8",
	} {
		d, err := parseNpyDescr(descr)
		if err != nil || d.goDescr() != want {
			t.Errorf("parseNpyDescr(%q) = %s, %v; want it read into %s", descr, d.goDescr(), err, want)
		}
	}
	for descr, want := range map[string]string{
		"<c8": "not supported", "|b1": "(bool)", "?": "(bool)", "<U5": "(a string)", "|O": "(Python objects)",
		"<M8[ns]": "(datetime)", "<f16": "not supported", "<i3": "not supported", "": "not supported", "<": "not supported",
	} {
		if _, err := parseNpyDescr(descr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseNpyDescr(%q): err = %v, want one containing %q", descr, err, want)
		}
	}
}

// An unsigned 8-byte value past int64 is an error, not a negative number.
func TestNpyUint64Overflow(t *testing.T) {
	b := npyFile(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }\n", bytes.Repeat([]byte{0xff}, 8))
	if a, err := readNpy(bytes.NewReader(b), int64(len(b))); err == nil || !strings.Contains(err.Error(), "does not fit an int64") {
		t.Errorf("read %v, err %v; want an error", a, err)
	}
}

func TestFortranToC(t *testing.T) {
	// A 2x3 array [[0 1 2] [3 4 5]] in Fortran order is 0 3 1 4 2 5.
	if got := fortranToC([]int{0, 3, 1, 4, 2, 5}, []int{2, 3}); !reflect.DeepEqual(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("2x3: %v", got)
	}
	// 2x2x2: element (i, j, k) sits at i + 2j + 4k in Fortran order.
	f := make([]int, 8)
	for i := range 2 {
		for j := range 2 {
			for k := range 2 {
				f[i+2*j+4*k] = 100*i + 10*j + k
			}
		}
	}
	if got := fortranToC(f, []int{2, 2, 2}); !reflect.DeepEqual(got, []int{0, 1, 10, 11, 100, 101, 110, 111}) {
		t.Errorf("2x2x2: %v", got)
	}
}

// The file's own type is what messages name (the user saved '|u1', not
// the int32 it was read into).
func TestNpyDescrInMessages(t *testing.T) {
	b, err := os.ReadFile("testdata/numpy_dtypes.npz")
	if err != nil {
		t.Fatal(err)
	}
	m, err := readNpzBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := m["u1"].descr(); got != "|u1" {
		t.Errorf("descr() of a |u1 array = %q", got)
	}
	if got := m["f4"].descr(); got != "<f4" {
		t.Errorf("descr() of a <f4 array = %q", got)
	}
}
