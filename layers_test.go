package gdn

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is this module's import path; packages are named without it ("gdn"
// for the root).
const module = "github.com/gdnjit/gdn"

// layerLine is one line of docs/DESIGN.md's list of who may import whom:
// four spaces, a package, "->" and the packages it may import.
var layerLine = regexp.MustCompile(`^    (\S+)\s+->(.*)$`)

// documentedLayers reads the list from docs/DESIGN.md, in its order.
func documentedLayers(t *testing.T) (order []string, allowed map[string][]string) {
	t.Helper()
	f, err := os.Open("docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allowed = map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages and who imports whom"
			continue
		}
		if m := layerLine.FindStringSubmatch(line); in && m != nil {
			if _, dup := allowed[m[1]]; dup {
				t.Fatalf("docs/DESIGN.md lists %s twice", m[1])
			}
			order = append(order, m[1])
			allowed[m[1]] = strings.Fields(m[2])
		}
	}
	if len(order) == 0 {
		t.Fatal(`docs/DESIGN.md has no "pkg -> imports" lines under "## Packages and who imports whom"`)
	}
	return order, allowed
}

// moduleImports runs go list over the module and returns, per package, the
// packages of this module it imports (tests' imports left out).
func moduleImports(t *testing.T, goTool string, tags ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list"}, tags...)
	args = append(args, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	local := func(p string) (string, bool) {
		if p == module {
			return "gdn", true
		}
		rest, ok := strings.CutPrefix(p, module+"/")
		return rest, ok
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, _ := local(f[0])
		got[pkg] = []string{}
		for _, imp := range f[1:] {
			if name, ok := local(imp); ok {
				got[pkg] = append(got[pkg], name)
			}
		}
	}
	return got
}

// The packages import one another as docs/DESIGN.md lists, and only
// downwards: every package of the module is listed, imports nothing of the
// module that its line does not name, and names only packages listed
// below it. internal/plan reaches no CUDA driver.
func TestLayers(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	order, allowed := documentedLayers(t)
	for i, pkg := range order {
		for _, dep := range allowed[pkg] {
			if j := slices.Index(order, dep); j <= i {
				t.Errorf("docs/DESIGN.md: %s may import %s, which is not listed below it", pkg, dep)
			}
		}
	}
	for _, tags := range [][]string{nil, {"-tags", "cuda"}} {
		for pkg, deps := range moduleImports(t, goTool, tags...) {
			may, listed := allowed[pkg]
			if !listed {
				t.Errorf("%v: package %s is not in docs/DESIGN.md's list", tags, pkg)
				continue
			}
			for _, dep := range deps {
				if !slices.Contains(may, dep) {
					t.Errorf("%v: %s imports %s; docs/DESIGN.md does not let it", tags, pkg, dep)
				}
			}
		}
		out, err := exec.Command(goTool, append(append([]string{"list", "-deps"}, tags...), "./internal/plan")...).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"/driver" || strings.HasPrefix(dep, "gorgonia.org/") {
				t.Errorf("%v: internal/plan depends on %s: planning must build and test without a GPU", tags, dep)
			}
		}
	}
}
