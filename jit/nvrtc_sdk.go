package jit

import (
	"os"
	"path/filepath"
)

// SDKDirEnv names the folder where scripts/cuda-sdk.sh keeps what it
// fetched; the script and LoadNVRTC read it the same way.
const SDKDirEnv = "GDN_CUDA_SDK_DIR"

// SDKHint is what to run, in gdn's source folder, to fetch NVRTC 12.4 and
// set up a shell for building and running gdn.
const SDKHint = `eval "$(scripts/cuda-sdk.sh)"`

// sdkLibDir is the folder where scripts/cuda-sdk.sh keeps NVRTC 12.4 and
// its builtins: $GDN_CUDA_SDK_DIR/lib, else $XDG_CACHE_HOME/gdn/cuda-sdk/lib,
// else ~/.cache/gdn/cuda-sdk/lib (the script's own default, an empty
// variable counting as unset as in its ${VAR:-default}). It is "" when
// none of these can be formed (no home folder).
//
// LoadNVRTC looks there last, so that `make run` (which runs the script
// in a shell of its own) followed by a gdn command in the user's shell
// finds the NVRTC the script fetched without the shell having eval'd it.
func sdkLibDir() string {
	if d := os.Getenv(SDKDirEnv); d != "" {
		return filepath.Join(d, "lib")
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home := os.Getenv("HOME")
		if home == "" {
			return ""
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "gdn", "cuda-sdk", "lib")
}
