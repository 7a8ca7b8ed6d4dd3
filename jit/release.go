//go:build !gdndev

package jit

import "github.com/gdnjit/gdn/kernsrc"

// DevBuild is false in a release build: RequestFor ignores DefinesEnv and
// GDN_LAB (build with -tags gdndev for kernel experiments).
const DevBuild = false

// devDefines is empty in a release build.
func devDefines() []string { return nil }

// devVariant is v itself in a release build.
func devVariant(v kernsrc.Variant) (kernsrc.Variant, error) { return v, nil }

// LabWrongOutputs is always false in a release build, which runs no
// experiment.
func LabWrongOutputs(string) (string, bool) { return "", false }
