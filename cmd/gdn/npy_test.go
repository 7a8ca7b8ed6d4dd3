package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
)

// npyFile frames a header dictionary and data as an .npy file of the given
// format version (1: 16-bit header length, 2 and 3: 32-bit).
func npyFile(version byte, dict string, data []byte) []byte {
	b := append([]byte(npyMagic), version, 0)
	if version == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
	}
	return append(append(b, dict...), data...)
}

func TestNpyRoundTrip(t *testing.T) {
	cases := map[string]*npyArray{
		"f4":       {Shape: []int{2, 3}, Data: []float32{1, -2.5, 3e-7, 4, 5, 6}},
		"f8":       {Shape: []int{3}, Data: []float64{1, 2, 3.25}},
		"i4":       {Shape: []int{4}, Data: []int32{0, -1, 2147483647, -2147483648}},
		"i8":       {Shape: []int{2, 1, 2}, Data: []int64{1 << 40, -3, 0, 7}},
		"scalar":   {Shape: []int{}, Data: []float32{0.125}},
		"scalar64": {Shape: []int{}, Data: []float64{0.088}},
		"empty":    {Shape: []int{0, 128}, Data: []float32{}},
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeNpy(&b, a); err != nil {
				t.Fatal(err)
			}
			if b.Len()%64 != 0 && a.size() == 0 {
				t.Errorf("header of %d bytes is not padded to 64", b.Len())
			}
			got, err := readNpy(&b, int64(b.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, a) {
				t.Errorf("read back %+v, wrote %+v", got, a)
			}
		})
	}
}

// TestNpyHeaderLikeNumPy pins the exact bytes NumPy writes for a 2x3
// float32 array (format 1.0, header padded to 64 bytes, newline last).
func TestNpyHeaderLikeNumPy(t *testing.T) {
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	want := "\x93NUMPY\x01\x00\x76\x00" + dict + strings.Repeat(" ", 128-10-len(dict)-1) + "\n"
	var b bytes.Buffer
	if err := writeNpy(&b, &npyArray{Shape: []int{2, 3}, Data: make([]float32, 6)}); err != nil {
		t.Fatal(err)
	}
	if got := b.String()[:128]; got != want {
		t.Errorf("header\n%q\nwant\n%q", got, want)
	}
}

// TestNpyVersion2 reads a format 2.0 file (32-bit header length), as NumPy
// writes for very large headers.
func TestNpyVersion2(t *testing.T) {
	data := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 5), 1<<62)
	b := npyFile(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", data)
	a, err := readNpy(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{5, 1 << 62}; !reflect.DeepEqual(a.Data, want) || !reflect.DeepEqual(a.Shape, []int{2}) {
		t.Errorf("got %v %v, want [2] %v", a.Shape, a.Data, want)
	}
}

func TestNpyMalformed(t *testing.T) {
	v1 := func(dict string, data ...byte) []byte { return npyFile(1, dict, data) }
	f4 := make([]byte, 24)
	cases := []struct {
		name, want string
		file       []byte
	}{
		{"bad magic", "bad magic", []byte("PK\x03\x04 not numpy at all")},
		{"truncated", "header", []byte("\x93NUM")},
		{"version", "version 9.0", []byte("\x93NUMPY\x09\x00\x00\x00")},
		{"minor version", "version 1.1", []byte("\x93NUMPY\x01\x01\x00\x00")},
		{"short header", "header", append([]byte("\x93NUMPY\x01\x00"), 0xff, 0x00, '{')},
		{"not a dict", "not a dictionary", v1("descr='<f4'")},
		{"a list", "not a dictionary", v1("['descr', '<f4']")},
		{"complex", "not supported", v1("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", f4...)},
		{"bool", "(bool) not supported", v1("{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }", f4...)},
		{"structured", "structured dtype", v1("{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (2,), }", f4...)},
		{"no shape", "want the keys 'descr', 'fortran_order' and 'shape'", v1("{'descr': '<f4', 'fortran_order': False, }", f4...)},
		{"bad shape", "bad dimension", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", f4...)},
		{"unclosed", "expected", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3 }", f4...)},
		{"short data", "data of shape [7] <f4", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", f4...)},
		{"huge shape", "too large", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000), }", f4...)},
		{"huge dimension", "bad dimension", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", f4...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readNpy(bytes.NewReader(c.file), int64(len(c.file)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	// A header claiming more data than the zip member holds fails before
	// anything is allocated.
	long := v1("{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", f4...)
	if _, err := readNpy(bytes.NewReader(long), 24); err == nil || !strings.Contains(err.Error(), "needs 28 bytes") {
		t.Errorf("err = %v, want one about the 28 bytes the shape needs", err)
	}
}

// TestNpyHeaderEdges covers headers that are easy to misread: each must be
// read correctly or be an error, never a panic or a wrong array.
func TestNpyHeaderEdges(t *testing.T) {
	f4x2 := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40} // 1, 2
	ok := map[string][]byte{
		"no newline":        npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4x2),
		"version 3.0":       npyFile(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", f4x2),
		"no trailing comma": npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n", f4x2),
		"keys out of order": npyFile(1, "{'shape': (2,), 'fortran_order': False, 'descr': '<f4', }\n", f4x2),
		"tab and newlines":  npyFile(1, "{'descr':\t'<f4',\n'fortran_order': False,\n'shape': (2,)}\n", f4x2),
	}
	for name, b := range ok {
		a, err := readNpy(bytes.NewReader(b), int64(len(b)))
		if err != nil || !reflect.DeepEqual(a.Data, []float32{1, 2}) || !reflect.DeepEqual(a.Shape, []int{2}) {
			t.Errorf("%s: %v, %v", name, a, err)
		}
	}
	bad := map[string]struct {
		file []byte
		want string
	}{
		"shape not a tuple": {npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': 2, }\n", f4x2), "not a tuple"},
		"empty shape text":  {npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': , }\n", f4x2), "header"},
		"huge header":       {npyFile(2, strings.Repeat(" ", 8), nil)[:12], "implausible"},
		"short by one item": {npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", f4x2), "ends after 8 of its 12 bytes"},
		"object dtype":      {npyFile(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", f4x2), "not supported"},
		"deep nesting":      {npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': "+strings.Repeat("(", 5000)+"}\n", f4x2), "nested deeper"},
	}
	// A header length of 2^32-1: bounded before anything is allocated.
	huge := bad["huge header"]
	binary.LittleEndian.PutUint32(huge.file[8:], math.MaxUint32)
	bad["huge header"] = huge
	for name, c := range bad {
		_, err := readNpy(bytes.NewReader(c.file), int64(len(c.file)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, c.want)
		}
	}
}
