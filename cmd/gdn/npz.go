package main

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// A small reader and writer of NumPy's .npy and .npz files
// (numpy.lib.format): enough for the arrays gdn exchanges with Python.
// Supported: little-endian float32, float64, int32 and int64 ('<f4', '<f8',
// '<i4', '<i8'), C order, format versions 1.0, 2.0 and 3.0, any rank
// including 0-d; .npz members stored or deflated.

// npyArray is an n-dimensional array in C (row-major) order.
type npyArray struct {
	Shape []int
	Data  any // []float32, []float64, []int32 or []int64 with prod(Shape) elements
}

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// npyMaxBytes bounds what a header may claim, so that a corrupt header fails
// cleanly instead of asking for an absurd allocation.
const npyMaxBytes = 1 << 40

// descr returns the array's NumPy type string.
func (a *npyArray) descr() string {
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

// writeNpy writes a in .npy format: version 1.0 when the header fits its
// 16-bit length field, 2.0 otherwise.
func writeNpy(w io.Writer, a *npyArray) error {
	if a.dataLen() < 0 {
		return fmt.Errorf("npy: unsupported data type %T", a.Data)
	}
	if a.dataLen() != a.size() {
		return fmt.Errorf("npy: shape %v needs %d elements, data has %d", a.Shape, a.size(), a.dataLen())
	}
	dims := make([]string, len(a.Shape))
	for i, d := range a.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := strings.Join(dims, ", ")
	if len(a.Shape) == 1 {
		shape += "," // a Python 1-tuple
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", a.descr(), shape)
	if err := writeNpyHeader(w, dict); err != nil {
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

// writeNpyData writes the elements little-endian, in chunks so that a large
// array does not need a second full-size copy.
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
// is an error before anything is allocated.
func readNpy(r io.Reader, limit int64) (*npyArray, error) {
	dict, err := readNpyHeader(r)
	if err != nil {
		return nil, err
	}
	descr, shape, err := parseNpyDict(dict)
	if err != nil {
		return nil, err
	}
	item := map[string]int{"<f4": 4, "<f8": 8, "<i4": 4, "<i8": 8}[descr]
	if item == 0 {
		return nil, fmt.Errorf("npy: dtype %q not supported (want little-endian '<f4', '<f8', '<i4' or '<i8')", descr)
	}
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > npyMaxBytes/item/d) {
			return nil, fmt.Errorf("npy: shape %v too large", shape)
		}
		n *= d
	}
	if int64(n*item) > limit {
		return nil, fmt.Errorf("npy: shape %v of %s needs %d bytes of data, the file has at most %d", shape, descr, n*item, limit)
	}
	// Read what is there instead of allocating what the headers claim: a
	// zip member's claimed size is a header field too, and a corrupt or
	// hostile file must not make the reader take memory it does not back.
	raw, err := io.ReadAll(io.LimitReader(r, int64(n*item)))
	if err == nil && len(raw) < n*item {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("npy: data of shape %v %s: %w", shape, descr, err)
	}
	return &npyArray{Shape: shape, Data: decodeNpyData(descr, raw, n)}, nil
}

// readNpyHeader checks the magic and version and returns the header
// dictionary text.
func readNpyHeader(r io.Reader) (string, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return "", fmt.Errorf("npy: header: %w", err)
	}
	if string(pre[:6]) != npyMagic {
		return "", errors.New("npy: not a .npy file (bad magic)")
	}
	var hlen int
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("npy: header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3: // 3.0 differs from 2.0 only in allowing UTF-8 in the header
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("npy: header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return "", fmt.Errorf("npy: format version %d.%d not supported (want 1.0, 2.0 or 3.0)", pre[6], pre[7])
	}
	if hlen > 1<<20 {
		return "", fmt.Errorf("npy: header length %d is implausible", hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", fmt.Errorf("npy: header: %w", err)
	}
	return string(hdr), nil
}

// decodeNpyData converts n little-endian elements of descr.
func decodeNpyData(descr string, raw []byte, n int) any {
	le := binary.LittleEndian
	switch descr {
	case "<f4":
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
		return out
	case "<f8":
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		return out
	case "<i4":
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(raw[4*i:]))
		}
		return out
	default: // "<i8"
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(raw[8*i:]))
		}
		return out
	}
}

// parseNpyDict reads the header dictionary, a Python literal such as
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//
// and returns the type string and the shape.
func parseNpyDict(s string) (descr string, shape []int, err error) {
	p := &pyLexer{s: s}
	if !p.eat('{') {
		return "", nil, fmt.Errorf("npy: header %q is not a dictionary", strings.TrimSpace(s))
	}
	seen := map[string]bool{}
	for !p.eat('}') {
		key, err := p.str()
		if err != nil {
			return "", nil, err
		}
		if !p.eat(':') {
			return "", nil, fmt.Errorf("npy: header: missing ':' after %q", key)
		}
		switch key {
		case "descr":
			descr, err = p.str()
		case "fortran_order":
			var fortran bool
			if fortran, err = p.boolean(); err == nil && fortran {
				err = errors.New("npy: Fortran-order arrays are not supported (save with C order)")
			}
		case "shape":
			shape, err = p.intTuple()
		default:
			err = fmt.Errorf("npy: header: unexpected key %q", key)
		}
		if err != nil {
			return "", nil, err
		}
		seen[key] = true
		if !p.eat(',') && p.peek() != '}' {
			return "", nil, fmt.Errorf("npy: header: expected ',' or '}' at offset %d", p.i)
		}
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return "", nil, fmt.Errorf("npy: header: missing key %q", k)
		}
	}
	return descr, shape, nil
}

// pyLexer scans the few Python literals a .npy header holds: quoted
// strings, True/False, and tuples of integers.
type pyLexer struct {
	s string
	i int
}

func (p *pyLexer) skipSpace() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *pyLexer) peek() byte {
	p.skipSpace()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// eat consumes c if it is next.
func (p *pyLexer) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *pyLexer) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", fmt.Errorf("npy: header: expected a string at offset %d", p.i)
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", errors.New("npy: header: unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

func (p *pyLexer) boolean() (bool, error) {
	p.skipSpace()
	for _, w := range []string{"True", "False"} {
		if strings.HasPrefix(p.s[p.i:], w) {
			p.i += len(w)
			return w == "True", nil
		}
	}
	return false, fmt.Errorf("npy: header: expected True or False at offset %d", p.i)
}

func (p *pyLexer) intTuple() ([]int, error) {
	if !p.eat('(') {
		return nil, fmt.Errorf("npy: header: expected a shape tuple at offset %d", p.i)
	}
	shape := []int{}
	for !p.eat(')') {
		p.skipSpace()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		d, err := strconv.Atoi(p.s[p.i:j])
		if err != nil {
			return nil, fmt.Errorf("npy: header: bad dimension at offset %d", p.i)
		}
		p.i = j
		if p.i < len(p.s) && p.s[p.i] == 'L' { // Python 2 long
			p.i++
		}
		shape = append(shape, d)
		if !p.eat(',') && p.peek() != ')' {
			return nil, fmt.Errorf("npy: header: expected ',' or ')' at offset %d", p.i)
		}
	}
	return shape, nil
}

// namedArray is one member of an .npz file.
type namedArray struct {
	Name  string // without the .npy suffix
	Array *npyArray
}

// writeNpz writes the arrays as an .npz (a zip of NAME.npy members) with
// the given zip method (zip.Store, as numpy.savez, or zip.Deflate, as
// numpy.savez_compressed).
func writeNpz(w io.Writer, arrays []namedArray, method uint16) error {
	zw := zip.NewWriter(w)
	for _, na := range arrays {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: na.Name + ".npy", Method: method})
		if err != nil {
			return fmt.Errorf("npz: %s: %w", na.Name, err)
		}
		if err := writeNpy(fw, na.Array); err != nil {
			return fmt.Errorf("npz: %s: %w", na.Name, err)
		}
	}
	return zw.Close()
}

// writeNpzFile writes an .npz file at path (stored members, as numpy.savez).
func writeNpzFile(path string, arrays []namedArray) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeNpz(f, arrays, zip.Store); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// readNpz reads every NAME.npy member of an .npz; the map is keyed by NAME.
func readNpz(r io.ReaderAt, size int64) (map[string]*npyArray, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	out := map[string]*npyArray{}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok {
			continue // not an array; numpy never writes such members
		}
		a, err := readNpzMember(f)
		if err != nil {
			return nil, fmt.Errorf("npz: %s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}

func readNpzMember(f *zip.File) (*npyArray, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	limit := int64(min(f.UncompressedSize64, npyMaxBytes))
	return readNpy(rc, limit)
}

// readNpzFile reads an .npz file from disk.
func readNpzFile(path string) (map[string]*npyArray, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := readNpz(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
