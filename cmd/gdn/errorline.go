package main

import (
	"fmt"
	"strings"
)

// libraryPrefix begins the errors of package gdn and the layers under it:
// the library's name, for programs that print its errors as they are.
const libraryPrefix = "gdn: "

// errorLine is the line gdn prints for command name that failed with err:
// "gdn NAME: " and the error, each thing said once. The library's own
// "gdn: " is left out wherever it begins the message or a part of it that
// a wrapper added (after ": " or "("), since the line already says gdn; an
// error that already names the command loses that prefix; and a segment
// that a wrapper repeats ("npz: npz: ...") is said once.
func errorLine(name string, err error) string {
	msg := err.Error()
	for _, p := range []string{"gdn " + name + ": ", libraryPrefix} {
		for strings.HasPrefix(msg, p) {
			msg = strings.TrimPrefix(msg, p)
		}
	}
	msg = strings.ReplaceAll(msg, ": "+libraryPrefix, ": ")
	msg = strings.ReplaceAll(msg, "("+libraryPrefix, "(")
	parts := strings.Split(msg, ": ")
	kept := parts[:1]
	for _, p := range parts[1:] {
		if p != kept[len(kept)-1] {
			kept = append(kept, p)
		}
	}
	return fmt.Sprintf("gdn %s: %s", name, strings.Join(kept, ": "))
}
