//go:build gdndev

package jit

import (
	"os"
	"strings"

	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/kernsrc/lab"
)

// DevBuild is true in a development build (go build -tags gdndev), whose
// RequestFor honours DefinesEnv and lab.EnvName.
const DevBuild = true

// devDefines are DefinesEnv's words as -D options.
func devDefines() []string {
	var out []string
	for _, d := range strings.Fields(os.Getenv(DefinesEnv)) {
		out = append(out, "-D"+d)
	}
	return out
}

// devVariant is the lab experiment's build of v when GDN_LAB names one
// (package kernsrc/lab), else v.
func devVariant(v kernsrc.Variant) (kernsrc.Variant, error) {
	name := os.Getenv(lab.EnvName)
	if name == "" {
		return v, nil
	}
	e, err := lab.Lookup(name)
	if err != nil {
		return v, err
	}
	return e.Variant(v)
}

// LabWrongOutputs names the experiment GDN_LAB selects when it leaves
// work out (lab.Experiment.WrongOutputs) and builds the named production
// kernel variant in its place: that kernel's outputs are then wrong by
// design, and a timing run should not hold them against it.
func LabWrongOutputs(kernel string) (string, bool) {
	e, err := lab.Lookup(os.Getenv(lab.EnvName))
	if err != nil || !e.WrongOutputs {
		return "", false
	}
	v, ok := kernsrc.Lookup(kernel)
	if !ok {
		return "", false
	}
	if lv, err := e.Variant(v); err != nil || lv.Name == v.Name {
		return "", false
	}
	return e.Name, true
}
