//go:build race

package main

// raceDetector: this test binary runs under the race detector, which
// slows the reference several times over.
const raceDetector = true
