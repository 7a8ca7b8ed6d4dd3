package main

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"strings"
)

// NumPy's .npz format: a zip archive of NAME.npy members (npy.go), as
// numpy.savez (stored) and numpy.savez_compressed (deflated) write it.

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
			return fmt.Errorf("%s.npy: %w", na.Name, err)
		}
		if err := writeNpy(fw, na.Array); err != nil {
			return fmt.Errorf("%s.npy: %w", na.Name, err)
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
// keyed by NAME. An error names the member it is about.
func readNpz(r io.ReaderAt, size int64) (map[string]*npyArray, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not an .npz file: %w", err)
	}
	out := map[string]*npyArray{}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok {
			continue // not an array; numpy never writes such members
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: the archive holds it twice", f.Name)
		}
		a, err := readNpzMember(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		out[name] = a
	}
	return out, nil
}

// readNpzMember reads one member. Its size in the zip directory bounds what
// its .npy header may claim; reading on to the member's end has archive/zip
// check its length and checksum.
func readNpzMember(f *zip.File) (*npyArray, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	a, err := readNpy(rc, int64(min(f.UncompressedSize64, npyMaxBytes)))
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return nil, err
	}
	return a, nil
}

// readNpzFile reads an .npz file from disk; an error names the file.
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
