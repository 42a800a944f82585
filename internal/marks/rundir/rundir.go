// Package rundir is a run's marks directory as dal-exec sees it (the agent
// writes it through package marks; docs/marks.md is the protocol): where it
// is and the variables that name it to the agent, and, once the agent has
// exited, the best-of-iterations outcome: the iterations judged (package
// iterate), the selected one's artifacts applied, every mark preserved.
//
// dal-exec record and replay show the directory inside the sandbox at
// marks.SandboxDir (ForSandbox, PlaceIn); dal-exec run, which has no
// sandbox, gives the agent one of its own (Plain). The agent controls the
// directory: it is read through package safefs only, never following a
// symlink.
package rundir

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/sandbox"
)

// Vars are the variables that point an agent working in ws at its marks
// directory dir (docs/marks.md).
func Vars(dir, ws string) map[string]string {
	return map[string]string{marks.EnvDir: dir, marks.EnvWorkspace: ws}
}

// ForSandbox creates the marks directory of a sandboxed run in dal's
// staging directory stage and returns it with the sandbox mount that
// shows it at marks.SandboxDir.
func ForSandbox(stage string) (string, sandbox.Mount, error) {
	dir := filepath.Join(stage, "marks")
	// Writers create iterations/ and checkpoints/; the agent may run as
	// another user than dal-exec.
	if err := os.Mkdir(dir, 0o777); err != nil {
		return "", sandbox.Mount{}, fmt.Errorf("create the marks directory: %w", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", sandbox.Mount{}, fmt.Errorf("create the marks directory: %w", err)
	}
	return dir, sandbox.Mount{Source: dir, Target: marks.SandboxDir}, nil
}

// Iterations is the best-of-iterations outcome of a run.
type Iterations struct {
	Selection *iterate.Selection
	Marks     []*marks.Mark
	// root is the marks directory the agent wrote; it is read through
	// safefs only (the agent may have planted symlinks there).
	root string
}

// Select reads the iteration marks in dir and judges them. It returns nil
// when the agent marked none.
func Select(dir string, p iterate.Policy) (*Iterations, error) {
	ms, inc, err := marks.Read(dir, marks.Iteration)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 && len(inc) == 0 {
		return nil, nil
	}
	sel, err := iterate.Select(ms, p)
	if err != nil {
		return nil, err
	}
	for _, i := range inc {
		sel.Warnings = append(sel.Warnings, i.String())
	}
	return &Iterations{Selection: sel, Marks: ms, root: dir}, nil
}

// Apply places the selected iteration's artifacts with place and lists
// them in the selection. An artifact outside the workspace, or whose copy
// changed after it was marked, is not applied and is named in a warning.
func (its *Iterations) Apply(place func(rel string, r io.Reader, mode fs.FileMode) error) error {
	sel := its.Selection
	var m *marks.Mark
	for _, x := range its.Marks {
		if x.Seq == sel.Selected {
			m = x
		}
	}
	if m == nil {
		return nil
	}
	root, err := safefs.Open(its.root)
	if err != nil {
		return fmt.Errorf("read the marks: %w", err)
	}
	defer root.Close()
	for _, a := range m.Artifacts {
		if filepath.IsAbs(a.Path) {
			sel.Warnings = append(sel.Warnings, fmt.Sprintf("iteration %d's artifact %s is outside the workspace: preserved, not applied", m.Seq, a.Path))
			continue
		}
		f, err := its.open(root, m, a)
		if err != nil {
			sel.Warnings = append(sel.Warnings, fmt.Sprintf("iteration %d's copy of %s is missing (%v): not applied", m.Seq, a.Path, err))
			continue
		}
		// The copy is checked against its mark while it is placed (the
		// marks directory is writable by the agent): a changed copy fails
		// the write, and place leaves the file as it was.
		v := &verified{r: f, h: sha256.New(), want: a.SHA256}
		err = place(a.Path, v, fs.FileMode(a.Mode).Perm())
		f.Close()
		var changed copyChanged
		if errors.As(err, &changed) {
			sel.Warnings = append(sel.Warnings, fmt.Sprintf("iteration %d's copy of %s changed after it was marked (sha256 %s, marked %s): not applied", m.Seq, a.Path, short(changed.got), short(a.SHA256)))
			continue
		}
		if err != nil {
			return fmt.Errorf("apply iteration %d's %s: %w", m.Seq, a.Path, err)
		}
		sel.Applied = append(sel.Applied, a.Path)
	}
	return nil
}

// open opens the copy of a in the mark m without following a symlink in
// the marks directory.
func (its *Iterations) open(root *safefs.Dir, m *marks.Mark, a marks.Artifact) (*os.File, error) {
	rel, err := its.markRel(m)
	if err != nil {
		return nil, err
	}
	return root.Open(path.Join(rel, a.File))
}

// markRel is the mark's directory relative to the marks directory.
func (its *Iterations) markRel(m *marks.Mark) (string, error) {
	rel, err := filepath.Rel(its.root, m.Dir)
	rel = filepath.ToSlash(rel)
	if err != nil || safefs.CheckPath(rel) != nil || rel == "." {
		return "", fmt.Errorf("mark %d lies outside the marks directory", m.Seq)
	}
	return rel, nil
}

// PlaceIn places files into the capture layer of a finished sandbox run
// (for Apply).
func PlaceIn(cfg sandbox.Config) func(rel string, r io.Reader, mode fs.FileMode) error {
	return func(rel string, r io.Reader, mode fs.FileMode) error { return sandbox.Place(cfg, rel, r, mode) }
}

// verified reads r and, at its end, fails with copyChanged unless what
// was read hashes to want.
type verified struct {
	r    io.Reader
	h    hash.Hash
	want string
}

type copyChanged struct{ got string }

func (c copyChanged) Error() string { return "the copy changed after it was marked" }

func (v *verified) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, copyChanged{got}
		}
	}
	return n, err
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Preserve copies the complete marks and the selection into dst
// (iterations/ of a bundle, or a directory of the user's state). The marks
// are read without following symlinks; a symlink in a mark is copied as a
// symlink, fifos, sockets and devices are left out.
func (its *Iterations) Preserve(dst string) error {
	root, err := safefs.Open(its.root)
	if err != nil {
		return fmt.Errorf("read the marks: %w", err)
	}
	defer root.Close()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	out, err := safefs.Open(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	for _, m := range its.Marks {
		rel, err := its.markRel(m)
		if err == nil {
			err = safefs.Copy(root, rel, out, fmt.Sprintf("%04d", m.Seq), nil)
		}
		if err != nil {
			return fmt.Errorf("preserve iteration %d: %w", m.Seq, err)
		}
		// A writer that died after the rename left no temp file; one that
		// the agent left behind is not part of the mark.
		out.Remove(fmt.Sprintf("%04d", m.Seq) + "/mark.json.tmp")
	}
	b, err := json.MarshalIndent(its.Selection, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "selection.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "selection-report.md"), []byte(its.Selection.Markdown()), 0o644)
}

// Report prints the selection in a few lines on w; where names the
// selection report ("" leaves it out).
func (its *Iterations) Report(w io.Writer, where string) {
	s := its.Selection
	how := "best"
	if s.Override {
		how = "override: " + s.Policy.Reason
	}
	score := "no score"
	if v, ok := s.Scored(); ok {
		score = fmt.Sprintf("quality %.2f", v)
	}
	fmt.Fprintf(w, "dal: %s; selected iteration %d (%s, %s) of final %d; applied %s\n", plural.Count(len(s.Iterations), "iteration", "iterations"), s.Selected, score, how, s.Final, listOrNone(s.Applied))
	for _, f := range s.Degradation {
		fmt.Fprintf(w, "dal: degradation at iteration %d: %s\n", f.Iteration, f.Detail)
	}
	if !s.Accepted {
		if _, ok := s.Scored(); ok {
			fmt.Fprintf(w, "dal: the selected iteration is below the acceptance threshold %.2f\n", s.Policy.Threshold)
		}
	}
	for _, m := range s.Warnings {
		fmt.Fprintf(w, "dal: %s\n", m)
	}
	if where != "" {
		fmt.Fprintf(w, "dal: selection report: %s\n", where)
	}
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "nothing"
	}
	return strings.Join(xs, ", ")
}

// Plain is the marks directory of a `dal-exec run`, which has no sandbox:
// the agent writes it directly, and FinishIterations applies the selection
// to the workspace itself.
type Plain struct {
	Dir, Workspace string
}

// NewPlain names a marks directory under the system's temporary
// directory for an agent working in ws. Nothing is created: the first mark
// creates it (writers create missing parents), so a run that marks nothing
// costs nothing. The name is unpredictable, so no other user can prepare it.
func NewPlain(ws string) (*Plain, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("dal-marks-%d-%s", os.Getpid(), hex.EncodeToString(b[:])))
	return &Plain{Dir: dir, Workspace: ws}, nil
}

// Vars are the variables to give the agent.
func (r *Plain) Vars() map[string]string { return Vars(r.Dir, r.Workspace) }

// Close removes the marks directory.
func (r *Plain) Close() error { return os.RemoveAll(r.Dir) }

// FinishIterations selects among the run's iterations, writes the selected
// artifacts into the workspace and preserves every iteration in keep
// (created). It returns nil when the agent marked none.
func (r *Plain) FinishIterations(p iterate.Policy, keep string, log io.Writer) (*iterate.Selection, error) {
	its, err := Select(r.Dir, p)
	if err != nil || its == nil {
		return nil, err
	}
	if err := its.Apply(func(rel string, src io.Reader, mode fs.FileMode) error {
		return writeInto(r.Workspace, rel, src, mode)
	}); err != nil {
		return its.Selection, err
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return its.Selection, fmt.Errorf("preserve the iterations: %w", err)
	}
	if err := its.Preserve(keep); err != nil {
		return its.Selection, err
	}
	its.Report(log, filepath.Join(keep, "selection-report.md"))
	return its.Selection, nil
}

// writeInto replaces the file rel of ws with src, atomically: it writes
// a new file under a random name beside rel (O_EXCL|O_NOFOLLOW) and renames
// it over rel. Nothing on the way is followed: a symlink where a parent
// directory should be is refused, one at rel is replaced.
func writeInto(ws, rel string, src io.Reader, mode fs.FileMode) error {
	clean := path.Clean(filepath.ToSlash(rel))
	if safefs.CheckPath(clean) != nil || clean == "." {
		return fmt.Errorf("%q is not a path inside the workspace", rel)
	}
	d, err := safefs.Open(ws)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.MkdirAll(path.Dir(clean), 0o755); err != nil {
		return err
	}
	var b [8]byte
	rand.Read(b[:])
	tmp := path.Join(path.Dir(clean), "."+path.Base(clean)+".partial-"+hex.EncodeToString(b[:]))
	f, err := d.Create(tmp, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if err == nil {
		err = f.Chmod(mode.Perm())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, clean)
	}
	if err != nil {
		d.Remove(tmp)
		return err
	}
	return nil
}
