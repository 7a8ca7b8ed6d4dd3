package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// NumPy's .npy format, the arrays `gdn run` exchanges with Python.
//
// Reading takes every header NumPy writes or accepts (format 1.0, 2.0 and
// 3.0; the header dictionary in any of Python's spellings: either quote,
// keys in any order, trailing commas or none; C or Fortran order; any
// byte order) for floats of 2, 4 or 8 bytes and integers of 1 to 8 bytes,
// read exactly into float32, float64, int32 or int64 (npyDtype.goDescr).
// Every bad file is an error, never a panic, a huge allocation or a wrong
// answer: what a header claims is checked against the bytes that are
// there before anything is allocated.
//
// Writing produces what numpy.save does: format 1.0 (2.0 when the header
// does not fit), C order, little-endian, the data 64-byte aligned.

// npyArray is an n-dimensional array in C (row-major) order.
type npyArray struct {
	Shape []int
	Data  any // []float32, []float64, []int32 or []int64 with prod(Shape) elements
	// Descr is the file's type string when it differs from the Go slice's
	// (e.g. "<f2" or "|u1" read exactly into float32 or int32), so that a
	// message about the array names the type the user saved; empty
	// otherwise.
	Descr string
}

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// npyMaxBytes bounds what a header may claim, so that a corrupt header fails
// cleanly instead of asking for an absurd allocation.
const npyMaxBytes = 1 << 40

// npyMaxHeader bounds the header dictionary; NumPy's are under 200 bytes.
const npyMaxHeader = 1 << 20

// goDescr returns the NumPy type string of the Go slice in Data.
func (a *npyArray) goDescr() string {
	switch a.Data.(type) {
	case []float32:
		return "<f4"
	case []float64:
		return "<f8"
	case []int32:
		return "<i4"
	case []int64:
		return "<i8"
	}
	return fmt.Sprintf("unsupported %T", a.Data)
}

// descr returns the array's type as the user saved it, for messages.
func (a *npyArray) descr() string {
	if a.Descr != "" {
		return a.Descr
	}
	return a.goDescr()
}

// size returns the number of elements the shape describes.
func (a *npyArray) size() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// dataLen returns the number of elements in Data.
func (a *npyArray) dataLen() int {
	switch d := a.Data.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	}
	return -1
}

// npyDict renders the header dictionary the way NumPy does.
func npyDict(descr string, shape []int) string {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	s := strings.Join(dims, ", ")
	if len(shape) == 1 {
		s += "," // a Python 1-tuple
	}
	return fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, s)
}

// writeNpy writes a in .npy format: version 1.0 when the header fits its
// 16-bit length field, 2.0 otherwise.
func writeNpy(w io.Writer, a *npyArray) error {
	if a.dataLen() < 0 {
		return fmt.Errorf("unsupported data type %T", a.Data)
	}
	if a.dataLen() != a.size() {
		return fmt.Errorf("shape %v needs %d elements, data has %d", a.Shape, a.size(), a.dataLen())
	}
	if err := writeNpyHeader(w, npyDict(a.goDescr(), a.Shape)); err != nil {
		return err
	}
	return writeNpyData(w, a.Data)
}

// writeNpyHeader writes magic, version, length and the dictionary, padded
// with spaces and a newline so the data starts on a 64-byte boundary (what
// NumPy writes, and what lets a reader map the data aligned). Version 1.0
// has a 16-bit header length; a longer header (a very high rank) needs 2.0.
func writeNpyHeader(w io.Writer, dict string) error {
	padded := func(prefix int) string {
		pad := (64 - (prefix+len(dict)+1)%64) % 64
		return dict + strings.Repeat(" ", pad) + "\n"
	}
	buf := append([]byte(npyMagic), 1, 0)
	if hdr := padded(len(buf) + 2); len(hdr) <= math.MaxUint16 {
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(hdr)))
		buf = append(buf, hdr...)
	} else {
		buf[6] = 2
		hdr = padded(len(buf) + 4)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(hdr)))
		buf = append(buf, hdr...)
	}
	_, err := w.Write(buf)
	return err
}

// writeNpyData writes the elements little-endian through a buffer, so that
// a large array needs no second full-size copy.
func writeNpyData(w io.Writer, data any) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var b [8]byte
	var err error
	put := func(p []byte) {
		if err == nil {
			_, err = bw.Write(p)
		}
	}
	switch d := data.(type) {
	case []float32:
		for _, v := range d {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			put(b[:4])
		}
	case []float64:
		for _, v := range d {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			put(b[:8])
		}
	case []int32:
		for _, v := range d {
			binary.LittleEndian.PutUint32(b[:], uint32(v))
			put(b[:4])
		}
	case []int64:
		for _, v := range d {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			put(b[:8])
		}
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// readNpy reads one .npy array. limit is the most bytes the data may take
// (the size of the enclosing file or zip member): a header that claims more
// is an error before anything is allocated. Errors say what is wrong; the
// caller says where (the member, the file).
func readNpy(r io.Reader, limit int64) (*npyArray, error) {
	dict, err := readNpyHeader(r)
	if err != nil {
		return nil, err
	}
	hdr, err := parseNpyHeader(dict)
	if err != nil {
		return nil, err
	}
	shape, dt := hdr.shape, hdr.dtype
	n := 1
	for _, d := range shape {
		if d > 0 && n > npyMaxBytes/dt.size/d {
			return nil, fmt.Errorf("shape %v too large", shape)
		}
		n *= d
	}
	want := int64(n) * int64(dt.size)
	if want > limit {
		return nil, fmt.Errorf("shape %v of %s needs %d bytes of data, the file has at most %d", shape, dt.descr, want, limit)
	}
	// Read what is there instead of allocating what the headers claim: a
	// zip member's claimed size is a header field too, and a corrupt or
	// hostile file must not make the reader take memory it does not back.
	raw, err := io.ReadAll(io.LimitReader(r, want))
	if err == nil && int64(len(raw)) < want {
		err = fmt.Errorf("the file ends after %d of its %d bytes", len(raw), want)
	}
	if err != nil {
		return nil, fmt.Errorf("data of shape %v %s: %w", shape, dt.descr, err)
	}
	data, err := dt.decode(raw, n)
	if err != nil {
		return nil, fmt.Errorf("data of shape %v %s: %w", shape, dt.descr, err)
	}
	if hdr.fortran {
		data = toCOrder(data, shape)
	}
	a := &npyArray{Shape: shape, Data: data}
	if dt.descr != a.goDescr() {
		a.Descr = dt.descr
	}
	return a, nil
}

// readNpyHeader checks the magic and version and returns the header
// dictionary text, bounded in length before it is allocated.
func readNpyHeader(r io.Reader) (string, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return "", fmt.Errorf("header: %w", err)
	}
	if string(pre[:6]) != npyMagic {
		return "", errors.New("not a .npy file (bad magic)")
	}
	var hlen int
	switch {
	case pre[6] == 1 && pre[7] == 0:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case (pre[6] == 2 || pre[6] == 3) && pre[7] == 0: // 3.0 differs from 2.0 only in allowing UTF-8 in the header
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return "", fmt.Errorf("format version %d.%d not supported (want 1.0, 2.0 or 3.0, as NumPy)", pre[6], pre[7])
	}
	if hlen > npyMaxHeader {
		return "", fmt.Errorf("header length %d is implausible (at most %d)", hlen, npyMaxHeader)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", fmt.Errorf("header: %w", err)
	}
	return string(hdr), nil
}
