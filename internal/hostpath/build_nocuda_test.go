//go:build !cuda

package hostpath

const cudaBuilt = false
