package jit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
	"strconv"
)

// keyVersion changes when the key's recipe or the meaning of an artifact
// changes, so old cache entries stop matching.
const keyVersion = "gdn-jit-key-v1"

// Key is the cache key of a request compiled by NVRTC nvrtcMajor.nvrtcMinor:
// the hex SHA-256 of the kernel name, the entries, a digest of the source and
// every header, the full option list (the -arch value included), the target
// and the NVRTC version. Any change to any of them changes the key, as in
// DeepGEMM's and Triton's caches.
func Key(req Request, nvrtcMajor, nvrtcMinor int) string {
	h := sha256.New()
	field := func(s string) { writeField(h, s) }
	field(keyVersion)
	field(req.Name)
	field(req.fileName())
	field(strconv.Itoa(len(req.Entries)))
	for _, e := range req.Entries {
		field(e)
	}
	field(SourceDigest(req.Source, req.Headers))
	opts := req.CompileOptions()
	field(strconv.Itoa(len(opts)))
	for _, o := range opts {
		field(o)
	}
	field(req.Target.String())
	field(strconv.Itoa(nvrtcMajor) + "." + strconv.Itoa(nvrtcMinor))
	return hex.EncodeToString(h.Sum(nil))
}

// SourceDigest is the hex SHA-256 of a main source and its headers (by name,
// in name order): the "source bundle" part of a cache key.
func SourceDigest(source string, headers map[string]string) string {
	h := sha256.New()
	writeField(h, source)
	names := make([]string, 0, len(headers))
	for n := range headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		writeField(h, n)
		writeField(h, headers[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeField writes a length-prefixed string, so that fields cannot run into
// each other ("ab","c" and "a","bc" hash differently).
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
