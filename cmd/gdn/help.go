package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The tool's help: `gdn help` lists the commands in the order a new user
// meets them, and `gdn help CMD` (or `gdn CMD -h`) shows a command's usage
// line, what it does, its notes, and its flags in groups.

// commandOrder is the order of the commands in `gdn help`: what the machine
// has, compiling, running, timing, testing, and which build this is. A
// command missing here is listed after these, by name.
var commandOrder = []string{"info", "warmup", "run", "bench", "soak", "version"}

// flagGroup is a heading and the flags under it, in the order shown.
type flagGroup struct {
	title string
	flags []string
}

// flagGroups are each command's flags by group. A flag of a command that
// no group names is shown under "other flags" (and TestHelpFlagsGrouped
// fails, so that a new flag gets its place).
var flagGroups = map[string][]flagGroup{
	"info": {
		{"flags", []string{"sms", "cache-dir"}},
	},
	"warmup": {
		{"target", []string{"arch"}},
		{"which kernels (default: all)", []string{"all", "variants", "shapes", "shapes-file", "dtypes", "full", "sms"}},
		{"how", []string{"cache-dir", "jobs", "strict"}},
	},
	"run": {
		{"files", []string{"in", "out"}},
		{"the forward", []string{"full", "l2norm", "gate-in-kernel", "beta-logits", "neg-eigval", "dtype"}},
		{"device", []string{"device"}},
	},
	"bench": {
		{"what to time", []string{"cases", "shapes", "full", "l2norm", "no-l2norm", "dtype", "a-dtype", "seed", "sms"}},
		{"timing", []string{"reps", "warmup", "calls", "runtime-graphs"}},
		{"results", []string{"csv", "plot", "compare", "from"}},
		{"forcing a plan, for tuning (default: the planner decides)", []string{"variant", "segments", "transfer-tile", "scan-columns", "early-first", "prep-heads", "prep-kernel", "l2norm-in-prep"}},
	},
	"soak": {
		{"how many problems", []string{"minutes", "count", "seed"}},
		{"one problem", []string{"case", "problem", "list"}},
		{"the check", []string{"o-ratio", "ht-maxabs", "ref-budget"}},
		{"device", []string{"device", "jobs"}},
	},
}

// helpWidth is the width help text is wrapped to.
const helpWidth = 80

// usage lists the commands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gdn <command> [flags]\n\ncommands:")
	names := slices.Clone(commandOrder)
	var rest []string
	for n := range commands {
		if !slices.Contains(names, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	for _, n := range append(names, rest...) {
		if c, ok := commands[n]; ok {
			fmt.Fprintf(w, "  %-8s %s\n", n, c.summary)
		}
	}
	fmt.Fprintln(w, "  help     this text; 'gdn help <command>' for a command's flags")
}

// newFlags returns a flag set for a subcommand that reports errors instead of
// exiting and prints its usage on stderr. synopsis is the command line after
// "gdn NAME" (more lines for more forms), then optionally a blank line and
// notes that follow the summary.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("gdn "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { commandUsage(fs.Output(), name, synopsis, fs) }
	return fs
}

// commandUsage prints a command's help: usage, summary, notes, flags.
func commandUsage(w io.Writer, name, synopsis string, fs *flag.FlagSet) {
	forms, notes, _ := strings.Cut(synopsis, "\n\n")
	for i, form := range strings.Split(forms, "\n") {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintln(w, wrapSynopsis(lead+"gdn "+name+" ", strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(form), "gdn "+name))))
	}
	fmt.Fprintf(w, "\n%s\n", wrapText(commands[name].summary, "", helpWidth))
	if notes = strings.TrimSpace(notes); notes != "" {
		fmt.Fprintf(w, "\n%s\n", notes)
	}
	shown := map[string]bool{}
	for _, g := range flagGroups[name] {
		var fl []*flag.Flag
		for _, n := range g.flags {
			if f := fs.Lookup(n); f != nil && !shown[n] {
				fl = append(fl, f)
				shown[n] = true
			}
		}
		printFlags(w, g.title, fl)
	}
	var other []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !shown[f.Name] {
			other = append(other, f)
		}
	})
	printFlags(w, "other flags", other)
}

// printFlags prints one group of flags under its title.
func printFlags(w io.Writer, title string, fl []*flag.Flag) {
	if len(fl) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, f := range fl {
		typ, text := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if typ != "" {
			head += " " + typ
		}
		switch f.DefValue {
		case "", "0", "false":
		default:
			if typ == "string" {
				text += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				text += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintf(w, "%s\n%s\n", head, wrapText(text, "      ", helpWidth))
	}
}

// wrapText fills text into lines of at most width columns, each starting
// with indent (a word longer than a line gets a line of its own).
func wrapText(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}

// wrapSynopsis writes a usage line lead+form within helpWidth columns,
// breaking only between top-level words and bracketed groups, with
// continuation lines indented under the first argument.
// A group too long for a line of its own is broken between its own words
// and inner groups.
func wrapSynopsis(lead, form string) string {
	indent := strings.Repeat(" ", len(lead))
	var b strings.Builder
	line := lead
	var place func(parts []string, depth int)
	place = func(parts []string, depth int) {
		for _, p := range parts {
			if line != lead && len(line)+len(p) > helpWidth {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = indent
			}
			if len(line)+len(p) > helpWidth && depth < 8 {
				if inner := splitAtDepth(p, depth+1); len(inner) > 1 {
					place(inner, depth+1)
					continue
				}
			}
			line += p + " "
		}
	}
	place(splitAtDepth(form, 0), 0)
	b.WriteString(strings.TrimRight(line, " "))
	return b.String()
}

// splitAtDepth splits s at the spaces that lie inside exactly depth
// brackets.
func splitAtDepth(s string, depth int) []string {
	var parts []string
	d, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			d++
		case ']':
			d--
		case ' ':
			if d == depth {
				if i > start {
					parts = append(parts, s[start:i])
				}
				start = i + 1
			}
		}
	}
	if start < len(s) {
		parts = append(parts, s[start:])
	}
	return parts
}
