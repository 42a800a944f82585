package dal

import (
	"bytes"
	"fmt"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

// The package list of docs/reference.md lies between these lines.
const (
	packagesBegin = "<!-- The package list below is generated from go list and each package's documentation; TestReferencePackages fails when it is stale (update: go test -run TestReferencePackages . -update). -->\n"
	packagesEnd   = "<!-- end of the generated package list -->\n"
)

// TestReferencePackages: docs/reference.md lists every package of the
// module, with the first sentence of its documentation, and nothing else.
func TestReferencePackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	table.WriteString("| package | what it is |\n|---|---|\n")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	for _, l := range lines {
		_, dir, _ := strings.Cut(l, "\t")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		synopsis, err := packageSynopsis(dir)
		if err != nil {
			t.Fatal(err)
		}
		if synopsis == "" {
			t.Errorf("%s has no package documentation: begin a file with // Package %s ... (or // Command ...)", rel, filepath.Base(dir))
			continue
		}
		fmt.Fprintf(&table, "| `%s` | %s |\n", filepath.ToSlash(rel), strings.ReplaceAll(synopsis, "|", `\|`))
	}
	page := filepath.Join("docs", "reference.md")
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(data), packagesBegin)
	_, after, ok2 := strings.Cut(rest, packagesEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the lines that enclose the package list:\n%s%s", page, packagesBegin, packagesEnd)
	}
	want := before + packagesBegin + table.String() + packagesEnd + after
	if want == string(data) {
		return
	}
	if golden.Update() {
		if err := os.WriteFile(page, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's package list is stale (a package added, removed or its documentation changed): go test -run TestReferencePackages . -update, then review with git diff\n%s",
		page, golden.Diff(rest[:strings.Index(rest, packagesEnd)], table.String()))
}

// packageSynopsis is the first sentence of the package comment of the
// Go files in dir, test files included (a package of tests alone, e2e,
// documents itself in one).
func packageSynopsis(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "", err
		}
		if af.Doc != nil && !strings.HasSuffix(af.Name.Name, "_test") {
			return new(doc.Package).Synopsis(af.Doc.Text()), nil
		}
	}
	return "", nil
}
