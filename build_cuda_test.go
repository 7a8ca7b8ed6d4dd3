//go:build cuda

package gdn

const cudaBuilt = true
