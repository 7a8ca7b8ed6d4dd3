package main

import (
	"fmt"
	"strings"
)

// libraryPrefix begins the errors of package gdn and the layers under it:
// the library's name, for programs that print its errors as they are.
const libraryPrefix = "gdn: "

// errorLine is the line gdn prints for command name that failed with err:
// "gdn NAME: " and the error, the library's own "gdn: " left out wherever
// it begins the message or a part of it that a wrapper added (after ": "
// or "("), since the line already says gdn once.
func errorLine(name string, err error) string {
	msg := strings.TrimPrefix(err.Error(), libraryPrefix)
	msg = strings.ReplaceAll(msg, ": "+libraryPrefix, ": ")
	msg = strings.ReplaceAll(msg, "("+libraryPrefix, "(")
	return fmt.Sprintf("gdn %s: %s", name, msg)
}
