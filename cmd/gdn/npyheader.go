package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gdnjit/gdn/dtype"
)

// npyHeader is what an .npy header says about the array after it.
type npyHeader struct {
	dtype   npyDtype
	fortran bool // elements in Fortran (column-major) order
	shape   []int
}

// parseNpyHeader reads an .npy header dictionary the way NumPy does
// (numpy.lib.format): a Python dict literal with exactly the keys 'descr',
// 'fortran_order' and 'shape', shape a tuple of integers, fortran_order a
// bool; on top of NumPy's checks, no dimension may be negative and descr
// must be a type gdn reads (npyDtype).
func parseNpyHeader(dict string) (npyHeader, error) {
	var h npyHeader
	shown := strings.TrimSpace(dict)
	if len(shown) > 160 {
		shown = shown[:160] + "..."
	}
	fail := func(format string, args ...any) (npyHeader, error) {
		return h, fmt.Errorf("header %q: %s", shown, fmt.Sprintf(format, args...))
	}
	v, err := parsePyLiteral(dict)
	if err != nil {
		if !strings.HasPrefix(strings.TrimLeft(shown, "("), "{") {
			return fail("not a dictionary (%v)", err)
		}
		return fail("%v", err)
	}
	if v.kind != pyDict {
		return fail("not a dictionary")
	}
	fields := map[string]pyValue{} // a repeated key counts once, its last value, as in Python
	for i := 0; i < len(v.items); i += 2 {
		if v.items[i].kind != pyStr {
			return fail("key %v is not a string", v.items[i])
		}
		fields[v.items[i].str] = v.items[i+1]
	}
	var keys []string
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"descr", "fortran_order", "shape"}) {
		return fail("want the keys 'descr', 'fortran_order' and 'shape', found %q", keys)
	}

	shape := fields["shape"]
	if shape.kind != pyTuple {
		return fail("shape %v is not a tuple of integers", shape)
	}
	h.shape = make([]int, len(shape.items))
	for i, d := range shape.items {
		if d.kind != pyInt {
			return fail("shape %v is not a tuple of integers", shape)
		}
		if d.num.Sign() < 0 || !d.num.IsInt64() || d.num.Int64() > math.MaxInt32 {
			return fail("bad dimension %v", d.num)
		}
		h.shape[i] = int(d.num.Int64())
	}

	fortran := fields["fortran_order"]
	if fortran.kind != pyBool {
		return fail("fortran_order %v is not True or False", fortran)
	}
	h.fortran = fortran.bool

	descr := fields["descr"]
	switch descr.kind {
	case pyStr:
		if h.dtype, err = parseNpyDescr(descr.str); err != nil {
			return fail("%v", err)
		}
	case pyList:
		return fail("a structured dtype (a list of fields) is not supported: save one array per field")
	default:
		return fail("descr %v is not a type string", descr)
	}
	return h, nil
}

// npyDtype is an element type gdn reads from .npy files: a float of 2, 4
// or 8 bytes or an integer of 1 to 8, in either byte order.
type npyDtype struct {
	descr string // as the header writes it, e.g. "<f4", "|u1", "float32"
	kind  byte   // 'f' float, 'i' signed integer, 'u' unsigned integer
	size  int    // bytes an element
	order binary.ByteOrder
}

// npyCharCodes are NumPy's one-letter type codes of the supported types
// (on Linux, where 'l' is 8 bytes).
var npyCharCodes = map[string]string{
	"b": "i1", "B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4", "l": "i8", "L": "u8",
	"q": "i8", "Q": "u8", "e": "f2", "f": "f4", "d": "f8",
}

// npyNames are the type names NumPy takes for the supported types.
var npyNames = map[string]string{
	"float16": "f2", "float32": "f4", "float64": "f8", "half": "f2", "single": "f4", "double": "f8",
	"int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8",
	"uint8": "u1", "uint16": "u2", "uint32": "u4", "uint64": "u8",
}

// npyOtherKinds names the kinds of NumPy types gdn does not read.
var npyOtherKinds = map[byte]string{
	'b': "bool", '?': "bool", 'c': "complex", 'U': "a string", 'S': "bytes", 'a': "bytes", 'O': "Python objects",
	'M': "datetime", 'm': "timedelta", 'V': "raw bytes",
}

// parseNpyDescr reads a NumPy type string: a byte order ('<' little, '>'
// big, '|' or '=' or none: this machine's) and a kind with its size in
// bytes ("f4"), or a one-letter code ("d") or a name ("float32").
func parseNpyDescr(s string) (npyDtype, error) {
	d := npyDtype{descr: s, order: binary.NativeEndian}
	body := s
	if t, ok := npyNames[s]; ok {
		body = t
	} else if body != "" && strings.IndexByte("<>|=", body[0]) >= 0 {
		switch body[0] {
		case '<':
			d.order = binary.LittleEndian
		case '>':
			d.order = binary.BigEndian
		}
		body = body[1:]
	}
	if t, ok := npyCharCodes[body]; ok {
		body = t
	}
	unsupported := fmt.Errorf("dtype %q not supported: gdn reads floats (f2, f4, f8) and integers (i1 to i8, u1 to u8), either byte order", s)
	if len(body) != 2 || strings.IndexByte("fiu", body[0]) < 0 {
		if body != "" {
			if what, ok := npyOtherKinds[body[0]]; ok && !(body[0] == 'b' && len(body) == 2 && body[1] != '1') {
				return d, fmt.Errorf("dtype %q (%s) not supported: gdn reads floats (f2, f4, f8) and integers (i1 to i8, u1 to u8)", s, what)
			}
		}
		return d, unsupported
	}
	d.kind, d.size = body[0], int(body[1]-'0')
	switch {
	case d.kind == 'f' && (d.size == 2 || d.size == 4 || d.size == 8):
	case d.kind != 'f' && (d.size == 1 || d.size == 2 || d.size == 4 || d.size == 8):
	default:
		return d, unsupported
	}
	return d, nil
}

// goDescr is the type string of the Go slice the elements are read into:
// float32 for f2 and f4, float64 for f8, int32 for the integers that fit
// it, int64 for the others (every conversion exact).
func (d npyDtype) goDescr() string {
	switch {
	case d.kind == 'f' && d.size <= 4:
		return "<f4"
	case d.kind == 'f':
		return "<f8"
	case d.size <= 2 || (d.kind == 'i' && d.size == 4):
		return "<i4"
	}
	return "<i8"
}

// decode converts the n elements in raw (n x size bytes) into the Go slice
// of goDescr. An unsigned 8-byte value past the int64 range is an error.
func (d npyDtype) decode(raw []byte, n int) (any, error) {
	o, sz := d.order, d.size
	at := func(i int) []byte { return raw[i*sz : (i+1)*sz] }
	switch d.goDescr() {
	case "<f4":
		out := make([]float32, n)
		for i := range out {
			if sz == 2 {
				out[i] = dtype.FP16ToFloat32(o.Uint16(at(i)))
			} else {
				out[i] = math.Float32frombits(o.Uint32(at(i)))
			}
		}
		return out, nil
	case "<f8":
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(o.Uint64(at(i)))
		}
		return out, nil
	case "<i4":
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(d.integer(at(i)))
		}
		return out, nil
	}
	out := make([]int64, n)
	for i := range out {
		v := d.integer(at(i))
		if d.kind == 'u' && d.size == 8 && v < 0 {
			return nil, fmt.Errorf("element %d, %d, does not fit an int64", i, uint64(v))
		}
		out[i] = v
	}
	return out, nil
}

// integer reads one integer element, sign-extended when signed (an
// unsigned 8-byte value past the int64 range comes back negative).
func (d npyDtype) integer(b []byte) int64 {
	var u uint64
	switch d.size {
	case 1:
		u = uint64(b[0])
	case 2:
		u = uint64(d.order.Uint16(b))
	case 4:
		u = uint64(d.order.Uint32(b))
	default:
		u = d.order.Uint64(b)
	}
	if d.kind == 'i' && d.size < 8 {
		shift := 64 - 8*uint(d.size)
		return int64(u<<shift) >> shift
	}
	return int64(u)
}

// fortranToC reorders the elements of an array of this shape from Fortran
// (first index fastest) to C order (last index fastest).
func fortranToC[T any](f []T, shape []int) []T {
	if len(shape) < 2 || len(f) == 0 {
		return f
	}
	stride := make([]int, len(shape)) // of each index in f
	stride[0] = 1
	for k := 1; k < len(shape); k++ {
		stride[k] = stride[k-1] * shape[k-1]
	}
	c := make([]T, len(f))
	idx := make([]int, len(shape))
	off := 0
	for i := range c {
		c[i] = f[off]
		for k := len(shape) - 1; k >= 0; k-- {
			idx[k]++
			off += stride[k]
			if idx[k] < shape[k] {
				break
			}
			off -= stride[k] * shape[k]
			idx[k] = 0
		}
	}
	return c
}

// toCOrder reorders decoded data read in Fortran order.
func toCOrder(data any, shape []int) any {
	switch d := data.(type) {
	case []float32:
		return fortranToC(d, shape)
	case []float64:
		return fortranToC(d, shape)
	case []int32:
		return fortranToC(d, shape)
	case []int64:
		return fortranToC(d, shape)
	}
	return data
}
