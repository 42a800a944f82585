package dal

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMakeHelp checks that `make help` lists every target of the Makefile
// (a target is a line "name:" or "name: prerequisites"; the $(GOIMPORTS)
// file target is not one a user runs).
func TestMakeHelp(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "--no-print-directory", "help").Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "make" {
			listed[f[1]] = true
		}
	}
	targets := regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):([^=]|$)`).FindAllStringSubmatch(string(mk), -1)
	if len(targets) < 10 {
		t.Fatalf("found %d targets in the Makefile: the pattern is broken", len(targets))
	}
	for _, m := range targets {
		if !listed[m[1]] && m[1] != "help" {
			t.Errorf("make help does not list make %s", m[1])
		}
	}
}
