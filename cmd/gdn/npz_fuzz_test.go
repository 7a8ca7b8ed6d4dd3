package main

import (
	"archive/zip"
	"bytes"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
)

// Fuzz targets of the tool's parsers: whatever the bytes, they return an
// error or a consistent value, never panic, hang or ask for absurd memory.
// CI runs each for a bounded time (Makefile, target test); the seed corpus
// and every crasher found are kept in testdata/fuzz/<FuzzName>/.

// FuzzReadNpz feeds files to readNpzFile, the reader `gdn run --in` uses,
// and what it accepts to hostArgsFromNpz and hostFullArgsFromNpz.
func FuzzReadNpz(f *testing.F) {
	f.Add([]byte("not a zip"))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	path := filepath.Join(f.TempDir(), "in.npz")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		arrays, err := readNpzFile(path)
		if err != nil {
			return
		}
		// What is accepted is self-consistent: every slice has its shape's length.
		if h, err := hostArgsFromNpz(arrays, gdn.BF16); err == nil {
			tok := h.B * h.T
			if len(h.Q) != tok*h.Hq*128 || len(h.K) != len(h.Q) || len(h.V) != tok*h.Hv*128 ||
				len(h.G) != tok*h.Hv || len(h.Beta) != len(h.G) || len(h.A) != tok*h.Hv*64 {
				t.Fatalf("accepted arrays of inconsistent lengths: B=%d T=%d Hq=%d Hv=%d", h.B, h.T, h.Hq, h.Hv)
			}
		}
		// The same file read for the full forward (--full, with and without
		// --gate-in-kernel).
		for _, gateIn := range []bool{false, true} {
			h, err := hostFullArgsFromNpz(arrays, gdn.BF16, true, gateIn)
			if err != nil {
				continue
			}
			tok := h.B * h.T
			if len(h.Q) != tok*h.Hq*128 || len(h.K) != len(h.Q) || len(h.V) != tok*h.Hv*128 ||
				len(h.G) != tok*h.Hv || len(h.Beta) != len(h.G) || (gateIn && (len(h.ALog) != h.Hv || len(h.DtBias) != h.Hv)) {
				t.Fatalf("accepted full-forward arrays of inconsistent lengths: B=%d T=%d Hq=%d Hv=%d", h.B, h.T, h.Hq, h.Hv)
			}
		}
	})
}

// A member whose zip header claims a huge size and whose .npy header a huge
// shape, with a few bytes of data, is an error found without allocating
// what the headers claim (a fuzzer's input must not take the machine's
// memory).
func TestReadNpzHugeClaims(t *testing.T) {
	hdr := "{'descr': '<f8', 'fortran_order': False, 'shape': (134217728,), }" // 1 GiB of float64
	npy := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)+1), 0)
	npy = append(append(npy, hdr...), '\n')
	npy = append(npy, make([]byte, 64)...)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "q.npy", Method: zip.Store, CRC32: crc32.ChecksumIEEE(npy),
		CompressedSize64: uint64(len(npy)), UncompressedSize64: 1 << 31})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(npy)
	zw.Close()
	path := filepath.Join(t.TempDir(), "huge.npz")
	os.WriteFile(path, b.Bytes(), 0o644)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = readNpzFile(path)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "q") {
		t.Errorf("readNpzFile = %v, want an error naming q", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("reading a %d-byte file allocated %d MB", b.Len(), got>>20)
	}
}
