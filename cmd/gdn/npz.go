package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"codeberg.org/sbinet/npyio/npy"
	"codeberg.org/sbinet/npyio/npz"
)

// NumPy's .npy and .npz files, the arrays `gdn run` exchanges with Python.
// Reading goes through codeberg.org/sbinet/npyio (npz for the archive, npy
// for each member's header and elements), behind checks that make every bad
// file an error rather than a panic, a huge allocation or a wrong answer:
// npyio v0.14.0 slices the header without bounds checks, accepts a header
// it only half understood, allocates what a header claims, and reads a
// short array as zeros. Writing stays here: npyio writes an n-dimensional
// shape only from nested Go slices walked by reflection (one slice header
// per row, element by element) and always as format 2.0, where gdn writes
// flat slices of millions of elements in NumPy's own 1.0 layout.
//
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

// npyMaxHeader bounds the header dictionary; NumPy's are under 200 bytes.
const npyMaxHeader = 1 << 20

// npyItemSize maps the supported type strings to their element size.
var npyItemSize = map[string]int{"<f4": 4, "<f8": 8, "<i4": 4, "<i8": 8}

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
		return fmt.Errorf("npy: unsupported data type %T", a.Data)
	}
	if a.dataLen() != a.size() {
		return fmt.Errorf("npy: shape %v needs %d elements, data has %d", a.Shape, a.size(), a.dataLen())
	}
	if err := writeNpyHeader(w, npyDict(a.descr(), a.Shape)); err != nil {
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
// is an error before anything is allocated.
func readNpy(r io.Reader, limit int64) (*npyArray, error) {
	dict, err := readNpyHeader(r)
	if err != nil {
		return nil, err
	}
	hdr, err := parseNpyHeader(dict)
	if err != nil {
		return nil, err
	}
	descr, shape := hdr.Descr.Type, hdr.Descr.Shape
	item := npyItemSize[descr]
	n := 1
	for _, d := range shape {
		if d > 0 && n > npyMaxBytes/item/d {
			return nil, fmt.Errorf("npy: shape %v too large", shape)
		}
		n *= d
	}
	want := int64(n) * int64(item)
	if want > limit {
		return nil, fmt.Errorf("npy: shape %v of %s needs %d bytes of data, the file has at most %d", shape, descr, want, limit)
	}
	// Read what is there instead of allocating what the headers claim: a
	// zip member's claimed size is a header field too, and a corrupt or
	// hostile file must not make the reader take memory it does not back.
	raw, err := io.ReadAll(io.LimitReader(r, want))
	if err == nil && int64(len(raw)) < want {
		err = fmt.Errorf("the file ends after %d of its %d bytes", len(raw), want)
	}
	if err != nil {
		return nil, fmt.Errorf("npy: data of shape %v %s: %w", shape, descr, err)
	}
	data, err := decodeNpy(dict, descr, n, raw)
	if err != nil {
		return nil, fmt.Errorf("npy: data of shape %v %s: %w", shape, descr, err)
	}
	return &npyArray{Shape: shape, Data: data}, nil
}

// readNpyHeader checks the magic and version and returns the header
// dictionary text, bounded in length before it is allocated.
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
	if hlen > npyMaxHeader {
		return "", fmt.Errorf("npy: header length %d is implausible (at most %d)", hlen, npyMaxHeader)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", fmt.Errorf("npy: header: %w", err)
	}
	return string(hdr), nil
}

// npyHeaderFor frames a dictionary as the smallest .npy file npyio reads:
// magic, version 2.0, length, the dictionary and the newline npyio looks for.
func npyHeaderFor(dict string) []byte {
	dict = strings.TrimRight(dict, " \n") + "\n"
	b := append([]byte(npyMagic), 2, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
	return append(b, dict...)
}

// parseNpyHeader reads the header dictionary with npyio and accepts it only
// when npyio understood all of it: the dictionary npyio's reading renders
// back must be the one in the file, whitespace aside. That also turns a
// panic of npyio's parser on a malformed header into an error.
func parseNpyHeader(dict string) (hdr npy.Header, err error) {
	trimmed := strings.TrimSpace(dict)
	if !strings.HasPrefix(trimmed, "{") || !strings.HasSuffix(trimmed, "}") {
		return hdr, fmt.Errorf("npy: header %q is not a dictionary", trimmed)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("npy: header %q is malformed", trimmed)
		}
	}()
	rr, err := npy.NewReader(bytes.NewReader(npyHeaderFor(dict)))
	if err != nil {
		return hdr, fmt.Errorf("npy: header %q: %w", trimmed, err)
	}
	hdr = rr.Header
	if hdr.Descr.Shape == nil {
		hdr.Descr.Shape = []int{} // npyio reads () as nil
	}
	hdr.Descr.Type = strings.Trim(hdr.Descr.Type, "'") // npyio keeps the quotes
	d := hdr.Descr
	for _, n := range d.Shape {
		if n < 0 {
			return hdr, fmt.Errorf("npy: header %q: bad dimension %d", trimmed, n)
		}
	}
	if d.Fortran {
		return hdr, errors.New("npy: Fortran-order arrays are not supported (save with C order)")
	}
	if npyItemSize[d.Type] == 0 {
		return hdr, fmt.Errorf("npy: dtype %s not supported (want little-endian '<f4', '<f8', '<i4' or '<i8')", d.Type)
	}
	squash := func(s string) string {
		s = strings.Join(strings.Fields(s), "")
		return strings.Replace(s, ",}", "}", 1)
	}
	if squash(dict) != squash(npyDict(d.Type, d.Shape)) {
		return hdr, fmt.Errorf("npy: header %q: expected the form %q", trimmed, npyDict("<f4", []int{2, 3}))
	}
	return hdr, nil
}

// decodeNpy converts the n elements in raw with npyio, into a slice of the
// Go type of descr. npyio's Array decodes in bulk; reading into a typed
// slice would go element by element through the reader, 5x slower.
func decodeNpy(dict, descr string, n int, raw []byte) (any, error) {
	rr, err := npy.NewReader(io.MultiReader(bytes.NewReader(npyHeaderFor(dict)), bytes.NewReader(raw)))
	if err != nil {
		return nil, err
	}
	var arr npy.Array
	if err := rr.Read(&arr); err != nil {
		return nil, err
	}
	data := arr.Data()
	got := (&npyArray{Data: data}).dataLen()
	if got != n {
		return nil, fmt.Errorf("npyio decoded %d elements of %T, want %d of %s", got, data, n, descr)
	}
	return data, nil
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

// readNpz reads every NAME.npy member of an .npz of size bytes; the map is
// keyed by NAME.
func readNpz(r io.ReaderAt, size int64) (map[string]*npyArray, error) {
	zr, err := npz.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	// npz.Reader does not tell a member's size, which bounds what its header
	// may claim; the zip directory does (archive/zip fails a member whose
	// data does not match it).
	dir, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	sizes := map[string]uint64{}
	for _, f := range dir.File {
		sizes[f.Name] = f.UncompressedSize64
	}
	out := map[string]*npyArray{}
	for _, key := range zr.Keys() {
		name, ok := strings.CutSuffix(key, ".npy")
		if !ok {
			continue // not an array; numpy never writes such members
		}
		a, err := readNpzMember(zr, key, int64(min(sizes[key], npyMaxBytes)))
		if err != nil {
			return nil, fmt.Errorf("npz: %s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}

// readNpzMember reads one member of at most limit bytes.
func readNpzMember(zr *npz.Reader, key string, limit int64) (*npyArray, error) {
	rc, err := zr.Open(key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
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
