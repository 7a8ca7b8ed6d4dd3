package testcache

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirFromEnv(t *testing.T) {
	want := filepath.Join(t.TempDir(), "a", "b")
	t.Setenv(Env, want)
	if got := Dir(t); got != want {
		t.Fatalf("Dir = %q, want %q", got, want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Fatalf("%s not created: %v", want, err)
	}
}

func TestDirWithoutEnv(t *testing.T) {
	t.Setenv(Env, "")
	a, b := Dir(t), Dir(t)
	if a == b {
		t.Fatalf("two calls gave the same temporary folder %q", a)
	}
	if fi, err := os.Stat(a); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v", a, err)
	}
}
