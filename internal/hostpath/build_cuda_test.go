//go:build cuda

package hostpath

const cudaBuilt = true
