package scripts

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chainSASS is cuobjdump -sass text of two functions: k_main with two
// rounds of wgmma, k_other with none.
const chainSASS = `
	code for sm_90a
		Function : k_main
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   WARPGROUP.ARRIVE ;                 /* 0x0000000000007990 */
        /*0010*/                   HGMMA.64x64x16.F32 R24, gdesc[UR8], RZ, !UPT ;  /* 0x00e00008181879f0 */
        /*0020*/                   IMAD.SHL.U32 R2, R3, 0x8, RZ ;     /* 0x0000000803027824 */
        /*0030*/                   HGMMA.64x64x16.F32 R24, gdesc[UR8], R24, gsb0 ;  /* 0x00e00008181879f0 */
        /*0040*/                   LDS R5, [R2+0x100] ;               /* 0x0001000002057984 */
        /*0050*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;    /* 0x00000000000079c4 */
        /*0060*/                   FFMA R6, R24, -R5, R7 ;            /* 0x8000000518067223 */
        /*0070*/               @P0 LDSM.16.MT88.4 R8, [R2] ;          /* 0x000000000208083b */
        /*0080*/                   WARPGROUP.ARRIVE ;                 /* 0x0000000000007990 */
        /*0090*/                   HGMMA.64x128x16.F32 R24, R8, gdesc[UR8].tnspB, R24, gsb0 ;  /* 0x00e00008181879f0 */
        /*00a0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;    /* 0x00000000000079c4 */
        /*00b0*/                   EXIT ;                             /* 0x000000000000794d */
		..........
		Function : k_other
        /*0000*/                   FMUL R1, R2, R3 ;                  /* 0x0000000302017220 */
        /*0010*/                   EXIT ;                             /* 0x000000000000794d */
		..........
`

// sassChain runs scripts/sasschain.py with args (from standard input, as
// manyHeadsScript does) and returns its output and error.
func sassChain(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return pyScript(t, "sasschain.py", args...)
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in:\n%s", w, out)
		}
	}
}

// Each round's three stretches, counted by class, from a SASS file.
func TestSASSChainRounds(t *testing.T) {
	sass := filepath.Join(t.TempDir(), "k.sass")
	if err := os.WriteFile(sass, []byte(chainSASS), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := sassChain(t, "--sass", sass, "--function", "main")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantLines(t, out,
		"k_main: 12 instructions",
		"  round 0 at #0: 2 HGMMA",
		"    issue         3  hgmma 2, int 1",
		"    in flight     1  load 1",
		"    after wait    2  load 1, float 1",
		"  round 1 at #8: 1 HGMMA",
		"    issue         1  hgmma 1",
		"    in flight     0  -",
		"    after wait    1  branch 1")
	if strings.Contains(out, "k_other") {
		t.Errorf("--function main printed k_other:\n%s", out)
	}
	out, err = sassChain(t, "--sass", sass, "--function", "other")
	if err != nil || !strings.Contains(out, "k_other: 2 instructions") || !strings.Contains(out, "no wgmma rounds") {
		t.Errorf("k_other: %v\n%s", err, out)
	}
	out, err = sassChain(t, "--sass", sass, "--function", "nope")
	if err == nil || !strings.Contains(out, "no function containing 'nope' (have k_main, k_other)") {
		t.Errorf("an unknown function: %v\n%s", err, out)
	}
}

// cacheEntry is a disk cache entry (jit/disk.go's format; the hash is not
// checked by the script) of the named variant holding image.
func cacheEntry(name string, ptx bool, image string) []byte {
	meta := `{"key":"k","name":"` + name + `","target":"sm_90a","report":{}}`
	b := make([]byte, 56)
	copy(b, "GDNK")
	binary.LittleEndian.PutUint32(b[4:], 1)
	if ptx {
		binary.LittleEndian.PutUint32(b[8:], 1)
	}
	binary.LittleEndian.PutUint32(b[12:], uint32(len(meta)))
	binary.LittleEndian.PutUint64(b[16:], uint64(len(image)))
	return append(append(b, meta...), image...)
}

// --cache finds the variant's cubin (not its PTX, not another variant's)
// and hands it to cuobjdump -sass.
func TestSASSChainCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string][]byte{
		"a.bin": cacheEntry("gdn_other", false, "OTHER"),
		"b.bin": cacheEntry("gdn_want", true, "PTX"),
		"c.bin": cacheEntry("gdn_want", false, "CUBIN"),
		"d.bin": []byte("not an entry"),
	} {
		if err := os.WriteFile(filepath.Join(cache, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A cuobjdump that prints the fixture for the cubin "CUBIN" only.
	sass := filepath.Join(dir, "k.sass")
	if err := os.WriteFile(sass, []byte(chainSASS), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "cuobjdump")
	script := "#!/bin/sh\n[ \"$1\" = -sass ] && [ \"$(cat \"$2\")\" = CUBIN ] && exec cat " + sass + "\necho wrong image >&2; exit 1\n"
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := sassChain(t, "--cache", cache, "gdn_want", "--cuobjdump", tool, "--function", "main")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantLines(t, out, "k_main: 12 instructions", "  round 1 at #8: 1 HGMMA")
	out, err = sassChain(t, "--cache", cache, "gdn_missing", "--cuobjdump", tool)
	if err == nil || !strings.Contains(out, "no cubin of 'gdn_missing' in") {
		t.Errorf("a missing variant: %v\n%s", err, out)
	}
}
