// Command gdn is gdn's command-line tool: one binary with subcommands.
//
//	gdn info                                      device, NVRTC and cache facts
//	gdn warmup [--arch sm_90a] [--variants a,b]   compile kernels into the disk cache
//	gdn run --in in.npz --out out.npz             the core forward on NumPy arrays
//	gdn run --full [--l2norm] [--gate-in-kernel] --in in.npz --out out.npz
//	                                              the full forward, from raw gates
//	gdn bench [--cases a,b] [--csv F] [--plot F.svg] [--compare OLD.csv]
//	                                              time the benchmark suite (docs/BENCH.md)
//	gdn bench --full [--l2norm]                   the same for the full forward, beside the
//	                                              target (0.8 x the faster of FlashQLA and FlashInfer)
//	gdn bench --from RUN.csv --plot F.png         chart or compare a saved run, no GPU
//	gdn soak --minutes 9                          random problems against the float64 reference
//	gdn version                                   this build's commit, Go version and tags
//	gdn help [command]                            usage
//
// The default build (no -tags cuda) links the driver stub: it compiles
// kernels and reports on NVRTC and the cache, and says there is no device.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand: a one-line summary for the usage text and the
// function that runs it with the arguments after its name.
type command struct {
	summary string
	run     func(args []string) error
}

// commands is the subcommand table. Each subcommand lives in its own file
// and adds itself from that file's init:
//
//	func init() { register("bench", "time the kernels on the benchmark suite", runBench) }
var commands = map[string]command{}

// register adds a subcommand to the table; a duplicate name is a programming
// error.
func register(name, summary string, run func(args []string) error) {
	if _, dup := commands[name]; dup {
		panic("gdn: subcommand " + name + " registered twice")
	}
	commands[name] = command{summary: summary, run: run}
}

// Subcommands write their results to stdout and their progress and
// diagnostics to stderr; tests replace both.
var (
	stdout io.Writer = os.Stdout
	stderr io.Writer = os.Stderr
)

// errUsage marks a command line that could not be parsed; the flag package
// (or newUsageError) has already said why, and gdn exits with status 2.
var errUsage = errors.New("usage error")

// errReported marks a command that failed and has said so in its own
// output (gdn soak's last line is its verdict): gdn exits with status 1
// without adding a line.
var errReported = errors.New("failure already reported")

func main() { os.Exit(gdnMain(os.Args[1:])) }

// gdnMain runs one command line and returns the exit status: 0 on success
// (and for help), 1 when the command fails, 2 for a bad command line.
func gdnMain(args []string) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-version", "--version":
		name = "version"
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			if c, ok := commands[rest[0]]; ok {
				// Asked for, the help goes to stdout (a pager can take it);
				// the command prints it on stderr for -h.
				saved := stderr
				stderr = stdout
				c.run([]string{"-h"})
				stderr = saved
				return 0
			}
			fmt.Fprintf(stderr, "gdn: unknown command %q\n", rest[0])
			usage(stderr)
			return 2
		}
		usage(stdout)
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "gdn: unknown command %q\n", name)
		usage(stderr)
		return 2
	}
	err := c.run(rest)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errReported):
		return 1
	default:
		fmt.Fprintln(stderr, errorLine(name, err))
		return 1
	}
}

// parseFlags parses args into fs. It returns flag.ErrHelp for -h, and
// errUsage (after printing why) for a bad flag or an unexpected argument.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	return nil
}
