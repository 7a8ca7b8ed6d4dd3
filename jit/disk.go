package jit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// CacheDirEnv is the environment variable that overrides the disk cache
// folder (default: the user cache folder's gdn/kernels).
const CacheDirEnv = "GDN_CACHE_DIR"

// ErrNotCached is DiskCache.Load's error for a key with no entry.
var ErrNotCached = errors.New("jit: not in the disk cache")

// ErrCorrupt is DiskCache.Load's error (wrapped) for an entry that fails its
// checks: truncated, bad magic, wrong hash or for another key. Load removes
// such an entry, so the next compile rewrites it.
var ErrCorrupt = errors.New("jit: corrupt disk cache entry")

// DiskCache is a folder of compiled modules, one file per key. Entries are
// written to a temporary file in the same folder and renamed into place, so
// a reader sees either no entry or a whole one, and several processes may
// fill one cache at once without locks (the last rename wins; every
// candidate is complete and valid). Reads verify a SHA-256 of the content.
type DiskCache struct {
	dir    string
	warned atomic.Bool // warnStoreFailed has spoken
}

// warnOut receives the one warning a cache gives when it cannot be written;
// tests replace it.
var warnOut io.Writer = os.Stderr

// warnStoreFailed says, once per cache, that compiled kernels cannot be
// kept. Compiles still work (the Artifact carries DiskErr), but every
// process compiles again, which the user should hear about once, not per
// kernel and not only with GDN_JIT_DEBUG.
func (d *DiskCache) warnStoreFailed(err error) {
	if d.warned.Swap(true) {
		return
	}
	fmt.Fprintf(warnOut, "gdn: warning: compiled kernels cannot be kept in %s (%v); they still compile, but every process compiles them again: set %s to a writable folder\n",
		d.dir, err, CacheDirEnv)
}

// DefaultCacheDir is $GDN_CACHE_DIR, else os.UserCacheDir()/gdn/kernels.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("jit: no cache folder (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(base, "gdn", "kernels"), nil
}

// OpenDiskCache returns the cache in dir ("" for DefaultCacheDir). The folder
// is created on the first Store, not here, so inspecting a cache (gdn info)
// changes nothing. Temporary files older than an hour, left by a process
// that died while writing, are removed.
func OpenDiskCache(dir string) (*DiskCache, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	d := &DiskCache{dir: dir}
	d.removeStaleTemps(time.Hour)
	return d, nil
}

// Dir returns the cache folder.
func (d *DiskCache) Dir() string { return d.dir }

// entryExt names cache entries: <key>.bin.
const entryExt = ".bin"

// tempPrefix starts the names of files being written.
const tempPrefix = ".tmp-"

// Path returns the file that holds key's entry.
func (d *DiskCache) Path(key string) string { return filepath.Join(d.dir, key+entryExt) }

// Size counts the entries and their bytes; a missing folder is an empty cache.
func (d *DiskCache) Size() (files int, bytes int64, err error) {
	ents, err := os.ReadDir(d.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), entryExt) || strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files++
		bytes += info.Size()
	}
	return files, bytes, nil
}

// The entry format: a fixed header, then a JSON metadata block, then the
// image. The header's hash covers the rest of the header, the metadata and
// the image.
//
//	0  magic   [4]byte "GDNK"
//	4  version uint32
//	8  flags   uint32 (bit 0: the image is PTX)
//	12 metaLen uint32
//	16 imgLen  uint64
//	24 sha256  [32]byte of bytes 0..24, metadata and image
//	56 metadata, image
const (
	diskMagic     = "GDNK"
	diskVersion   = 1
	diskHeaderLen = 56
	flagPTX       = 1
)

// diskMeta is the JSON block of an entry.
type diskMeta struct {
	Key         string            `json:"key"`
	Name        string            `json:"name"`
	Target      string            `json:"target"`
	Report      Report            `json:"report"`
	Log         string            `json:"log,omitempty"`
	Lowered     map[string]string `json:"lowered,omitempty"`
	CompileTime time.Duration     `json:"compile_ns"`
}

// encode serialises a as an entry.
func encode(a *Artifact) ([]byte, error) {
	meta, err := json.Marshal(diskMeta{
		Key: a.Key, Name: a.Name, Target: a.Target.String(), Report: a.Report,
		Log: a.Log, Lowered: a.Lowered, CompileTime: a.CompileTime,
	})
	if err != nil {
		return nil, err
	}
	buf := make([]byte, diskHeaderLen, diskHeaderLen+len(meta)+len(a.Image))
	copy(buf, diskMagic)
	binary.LittleEndian.PutUint32(buf[4:], diskVersion)
	var flags uint32
	if a.IsPTX {
		flags |= flagPTX
	}
	binary.LittleEndian.PutUint32(buf[8:], flags)
	binary.LittleEndian.PutUint32(buf[12:], uint32(len(meta)))
	binary.LittleEndian.PutUint64(buf[16:], uint64(len(a.Image)))
	buf = append(buf, meta...)
	buf = append(buf, a.Image...)
	sum := entryHash(buf)
	copy(buf[24:56], sum[:])
	return buf, nil
}

// entryHash hashes an entry's bytes except the hash field itself.
func entryHash(b []byte) [32]byte {
	h := sha256.New()
	h.Write(b[:24])
	h.Write(b[diskHeaderLen:])
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// decode checks and parses an entry read for key.
func decode(key string, b []byte) (*Artifact, error) {
	if len(b) < diskHeaderLen {
		return nil, fmt.Errorf("%d bytes, shorter than the header", len(b))
	}
	if string(b[:4]) != diskMagic {
		return nil, errors.New("bad magic")
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != diskVersion {
		return nil, fmt.Errorf("format version %d, want %d", v, diskVersion)
	}
	flags := binary.LittleEndian.Uint32(b[8:])
	metaLen := uint64(binary.LittleEndian.Uint32(b[12:]))
	imgLen := binary.LittleEndian.Uint64(b[16:])
	if want := diskHeaderLen + metaLen + imgLen; metaLen > uint64(len(b)) || imgLen > uint64(len(b)) || want != uint64(len(b)) {
		return nil, fmt.Errorf("%d bytes, header says %d", len(b), diskHeaderLen+metaLen+imgLen)
	}
	if sum := entryHash(b); !bytes.Equal(sum[:], b[24:56]) {
		return nil, errors.New("content hash mismatch")
	}
	var m diskMeta
	if err := json.Unmarshal(b[diskHeaderLen:diskHeaderLen+metaLen], &m); err != nil {
		return nil, fmt.Errorf("metadata: %v", err)
	}
	if m.Key != key {
		return nil, fmt.Errorf("entry is for key %s", short(m.Key))
	}
	t, err := ParseTarget(m.Target)
	if err != nil {
		return nil, err
	}
	img := make([]byte, imgLen)
	copy(img, b[diskHeaderLen+metaLen:])
	return &Artifact{
		Key: key, Name: m.Name, Target: t, Image: img, IsPTX: flags&flagPTX != 0,
		Report: m.Report, Log: m.Log, Lowered: m.Lowered, CompileTime: m.CompileTime,
	}, nil
}

// Load reads key's entry. It returns ErrNotCached when there is none, and an
// error wrapping ErrCorrupt, after removing the file, when the entry fails
// its checks.
func (d *DiskCache) Load(key string) (*Artifact, error) {
	p := d.Path(key)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotCached
	}
	if err != nil {
		return nil, fmt.Errorf("jit: disk cache: %w", err)
	}
	a, err := decode(key, b)
	if err != nil {
		// Remove only if it is still the file we read: another process may
		// have renamed a good entry into place meanwhile.
		if cur, rerr := os.ReadFile(p); rerr == nil && bytes.Equal(cur, b) {
			os.Remove(p)
		}
		return nil, fmt.Errorf("%w %s: %v", ErrCorrupt, p, err)
	}
	return a, nil
}

// Store writes a's entry atomically: a temporary file in the cache folder,
// renamed onto the entry's name. It does not fsync: a file torn by a crash
// fails its hash on the next Load and is compiled again.
func (d *DiskCache) Store(a *Artifact) error {
	if a.Key == "" {
		return errors.New("jit: disk cache: artifact has no key")
	}
	b, err := encode(a)
	if err != nil {
		return fmt.Errorf("jit: disk cache: %w", err)
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("jit: disk cache: %w", err)
	}
	f, err := os.CreateTemp(d.dir, tempPrefix+short(a.Key)+"-*")
	if err != nil {
		return fmt.Errorf("jit: disk cache: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, d.Path(a.Key))
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("jit: disk cache: %w", werr)
	}
	return nil
}

// removeStaleTemps deletes temporary files older than age.
func (d *DiskCache) removeStaleTemps(age time.Duration) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			os.Remove(filepath.Join(d.dir, e.Name()))
		}
	}
}
