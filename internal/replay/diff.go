package replay

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/vclock"
)

// loaded is the parts of a bundle that Diff compares.
type loaded struct {
	env            record.RunEnv
	stdout, stderr []byte
	changes        []sandbox.Change
	clock          *vclock.File
	iterations     []*marks.Mark
}

func load(path string, opts bundle.OpenOptions) (*loaded, error) {
	b, err := bundle.Open(path, opts)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	l := &loaded{}
	if err := b.ReadJSON("env.json", &l.env); err != nil {
		return nil, err
	}
	if l.stdout, err = b.ReadFile("logs/stdout"); err != nil {
		return nil, err
	}
	if l.stderr, err = b.ReadFile("logs/stderr"); err != nil {
		return nil, err
	}
	if l.changes, err = Changes(b); err != nil {
		return nil, err
	}
	if l.clock, err = Clock(b); err != nil {
		return nil, err
	}
	if l.iterations, _, err = marks.Read(filepath.Dir(b.File("iterations")), marks.Iteration); err != nil {
		return nil, err
	}
	return l, nil
}

// Diff compares two bundles component by component: how each was run,
// then what each did. Every component is compared; a component that
// differs names its first difference. Both bundles are opened with opts
// (their signers must be trusted).
func Diff(pathA, pathB string, opts bundle.OpenOptions) ([]Component, error) {
	a, err := load(pathA, opts)
	if err != nil {
		return nil, err
	}
	b, err := load(pathB, opts)
	if err != nil {
		return nil, err
	}
	cmp := func(name string, same bool, first string) Component {
		return Component{Name: name, Compared: true, Match: same, First: ifNot(same, first)}
	}
	cs := []Component{
		cmp("command", slices.Equal(a.env.Command, b.env.Command), fmt.Sprintf("%q vs %q", a.env.Command, b.env.Command)),
		cmp("mode", a.env.Mode == b.env.Mode, a.env.Mode+" vs "+b.env.Mode),
		cmp("seed", a.env.Seed == b.env.Seed, fmt.Sprintf("%d vs %d", a.env.Seed, b.env.Seed)),
		cmp("epoch", a.env.Epoch.Equal(b.env.Epoch), a.env.Epoch.String()+" vs "+b.env.Epoch.String()),
		cmp("exit_code", a.env.ExitCode == b.env.ExitCode, fmt.Sprintf("%d vs %d", a.env.ExitCode, b.env.ExitCode)),
		{Name: "stdout", Compared: true, Match: bytes.Equal(a.stdout, b.stdout), First: FirstLineDiff(a.stdout, b.stdout)},
		{Name: "stderr", Compared: true, Match: bytes.Equal(a.stderr, b.stderr), First: FirstLineDiff(a.stderr, b.stderr)},
		compareFS(a.changes, b.changes, "first bundle", "second bundle"),
		compareClock(a.clock, b.clock),
	}
	if len(a.iterations) > 0 || len(b.iterations) > 0 {
		cs = append(cs, compareIterations(a.iterations, b.iterations, "first bundle", "second bundle"))
	}
	return cs, nil
}
