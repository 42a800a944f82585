// Package marks reads and writes the marks directory through which an agent
// tells dal-exec about its refinement iterations and its checkpoints
// (docs/marks.md is the protocol). The Python and Node shims write the same
// format; this package is the reference and the shell's writer
// (dal-exec iteration, dal-exec checkpoint save).
package marks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/usage"
)

// Version is the protocol version written in every mark.
const Version = 1

// Kinds of marks, also the names of their directories.
const (
	Iteration  = "iteration"
	Checkpoint = "checkpoint"
	// Phase marks the start of a phase of the agent's work (dal.phase,
	// dal-exec phase): a checkpoint with --auto-checkpoint phase_start.
	Phase = "phase"
)

// Environment variables the runner sets for the agent.
const (
	EnvDir       = "DAL_MARKS"
	EnvWorkspace = "DAL_WORKSPACE"
)

// SandboxDir is where the marks directory is shown inside record and replay
// sandboxes (their private /tmp), so the agent's environment is the same in
// both.
const SandboxDir = "/tmp/.dal/marks"

// Mark is one mark.json.
type Mark struct {
	V          int                `json:"v"`
	Kind       string             `json:"kind"`
	Seq        int                `json:"seq"`
	Score      *float64           `json:"score"`
	Dimensions map[string]float64 `json:"dimensions,omitempty"`
	Name       string             `json:"name,omitempty"`
	Tag        string             `json:"tag,omitempty"`
	State      json.RawMessage    `json:"state,omitempty"`
	Note       string             `json:"note,omitempty"`
	Artifacts  []Artifact         `json:"artifacts"`
	Runtime    string             `json:"runtime,omitempty"`
	PID        int                `json:"pid,omitempty"`
	AtNS       int64              `json:"at_ns,omitempty"`

	// Dir is the mark's directory (not serialized).
	Dir string `json:"-"`
	// root is the marks directory the mark was read from or written to
	// (dal's own) and rel the mark's directory in it: the agent can plant
	// symbolic links below root, so what is below is opened through
	// safefs, never by path.
	root, rel string
}

// Artifact is one file a mark preserved.
type Artifact struct {
	Path   string `json:"path"`
	Abs    string `json:"abs,omitempty"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode"`
}

// Open returns the copy of a's content in the mark m, a regular file
// reached without following a symbolic link below the marks directory.
func (m *Mark) Open(a Artifact) (*os.File, error) {
	if m.root == "" {
		return nil, fmt.Errorf("marks: %s %d was not read from a marks directory", m.Kind, m.Seq)
	}
	root, err := safefs.Open(m.root)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Open(path.Join(m.rel, a.File))
}

// Input is what a writer is given.
type Input struct {
	Kind       string
	Score      *float64
	Dimensions map[string]float64
	Name, Tag  string
	State      json.RawMessage
	Note       string
	Paths      []string // files or directories, relative to Cwd or absolute
	Cwd        string   // "" = the process's
	Workspace  string   // DAL_WORKSPACE; "" = paths stay as given
	Runtime    string
	PID        int
	AtNS       int64
}

// Write validates in, claims the next number of its kind in dir and writes
// the mark. The mark is complete only once Write returns nil. Bad input
// from the agent is a usage.Error, and then nothing was written.
func Write(dir string, in Input) (*Mark, error) {
	if in.Kind != Iteration && in.Kind != Checkpoint && in.Kind != Phase {
		return nil, fmt.Errorf("marks: unknown kind %q", in.Kind)
	}
	if in.Score != nil {
		if err := checkUnit("score", *in.Score); err != nil {
			return nil, usage.Error{Err: err}
		}
	}
	for k, v := range in.Dimensions {
		if err := checkUnit("dimension "+k, v); err != nil {
			return nil, usage.Error{Err: err}
		}
	}
	if len(in.State) > 0 && !json.Valid(in.State) {
		return nil, usage.Error{Err: errors.New("the checkpoint state is not valid JSON")}
	}
	cwd := in.Cwd
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	files, err := expand(cwd, in.Paths)
	if err != nil {
		return nil, err
	}
	d, seq, err := claim(filepath.Join(dir, in.Kind+"s"))
	if err != nil {
		return nil, err
	}
	m := &Mark{V: Version, Kind: in.Kind, Seq: seq, Score: in.Score, Dimensions: in.Dimensions, Name: in.Name,
		Tag: in.Tag, State: in.State, Note: in.Note, Artifacts: []Artifact{}, Runtime: in.Runtime, PID: in.PID,
		AtNS: in.AtNS, Dir: d, root: dir, rel: path.Join(in.Kind+"s", filepath.Base(d))}
	if err := os.Mkdir(filepath.Join(d, "files"), 0o755); err != nil {
		return nil, err
	}
	for i, abs := range files {
		a, err := copyArtifact(abs, filepath.Join(d, "files", strconv.Itoa(i)))
		if err != nil {
			return nil, err
		}
		a.File = "files/" + strconv.Itoa(i)
		a.Path = relTo(in.Workspace, abs)
		m.Artifacts = append(m.Artifacts, a)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(d, "mark.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return m, os.Rename(tmp, filepath.Join(d, "mark.json"))
}

func checkUnit(what string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fmt.Errorf("the %s must be a number in [0, 1], got %v", what, v)
	}
	return nil
}

// expand resolves paths against cwd and expands directories to their
// regular files, sorted.
func expand(cwd string, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		p = filepath.Clean(p)
		fi, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usage.Error{Err: fmt.Errorf("artifact %s does not exist", p)}
			}
			return nil, err
		}
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				return nil, usage.Error{Err: fmt.Errorf("artifact %s is not a regular file or a directory", p)}
			}
			out = append(out, p)
			continue
		}
		// A symbolic link to a directory is walked as the directory, its
		// files named under the link.
		root, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		var inDir []string
		err = filepath.WalkDir(root, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				rel, _ := filepath.Rel(root, q)
				inDir = append(inDir, filepath.Join(p, rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(inDir)
		out = append(out, inDir...)
	}
	return out, nil
}

// relTo returns abs relative to ws with / separators when it is inside,
// else abs.
func relTo(ws, abs string) string {
	if ws == "" {
		return abs
	}
	rel, err := filepath.Rel(ws, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return abs
	}
	return filepath.ToSlash(rel)
}

func copyArtifact(src, dst string) (Artifact, error) {
	in, err := os.Open(src)
	if err != nil {
		return Artifact{}, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return Artifact{}, err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return Artifact{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("copy artifact %s: %w", src, err)
	}
	return Artifact{Abs: src, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, Mode: uint32(fi.Mode().Perm())}, nil
}

// claim makes the next numbered directory in parent with mkdir, which is
// atomic: concurrent writers never share a number.
func claim(parent string) (string, int, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", 0, err
	}
	root, err := safefs.Open(filepath.Dir(parent))
	if err != nil {
		return "", 0, err
	}
	seqs, err := numbered(root, filepath.Base(parent))
	root.Close()
	if err != nil {
		return "", 0, err
	}
	n := 1
	if len(seqs) > 0 {
		n = seqs[len(seqs)-1] + 1
	}
	for ; ; n++ {
		d := filepath.Join(parent, fmt.Sprintf("%04d", n))
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, n, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", 0, err
		}
	}
}

// numbered lists the numbers of the numbered directories in parent, sorted.
func numbered(root *safefs.Dir, parent string) ([]int, error) {
	ents, err := root.ReadDir(parent)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n > 0 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Incomplete is a mark whose writer stopped before mark.json existed.
type Incomplete struct {
	Kind string
	Seq  int
}

func (i Incomplete) String() string {
	return fmt.Sprintf("%s %d was not completed: the agent stopped while writing it", i.Kind, i.Seq)
}

// Read returns the complete marks of kind in dir, by number, and the
// incomplete ones. A mark.json that cannot be read is an error naming it.
// The agent writes below dir: nothing there is reached through a symbolic
// link (a link where a mark's directory or mark.json should be is an
// error), and mark.json is read up to maxMarkSize.
func Read(dir, kind string) ([]*Mark, []Incomplete, error) {
	parent := kind + "s"
	root, err := safefs.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	seqs, err := numbered(root, parent)
	if err != nil {
		return nil, nil, err
	}
	var out []*Mark
	var inc []Incomplete
	for _, n := range seqs {
		rel := path.Join(parent, fmt.Sprintf("%04d", n))
		b, err := readMark(root, path.Join(rel, "mark.json"))
		if errors.Is(err, fs.ErrNotExist) {
			inc = append(inc, Incomplete{kind, n})
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s %d: mark.json cannot be read: %w", kind, n, err)
		}
		m := &Mark{}
		if err := json.Unmarshal(b, m); err != nil {
			return nil, nil, fmt.Errorf("%s %d: mark.json is not valid (%v); the agent's writer is broken", kind, n, err)
		}
		if m.V != Version || m.Kind != kind || m.Seq != n {
			return nil, nil, fmt.Errorf("%s %d: mark.json says v%d %s %d; expected v%d %s %d", kind, n, m.V, m.Kind, m.Seq, Version, kind, n)
		}
		for _, a := range m.Artifacts {
			if a.File == "" || strings.Contains(a.File, "..") || filepath.IsAbs(a.File) {
				return nil, nil, fmt.Errorf("%s %d: artifact %q has an invalid file %q", kind, n, a.Path, a.File)
			}
		}
		m.Dir, m.root, m.rel = filepath.Join(dir, filepath.FromSlash(rel)), dir, rel
		out = append(out, m)
	}
	return out, inc, nil
}

// maxMarkSize bounds a mark.json: the agent writes it.
const maxMarkSize = 16 << 20

// readMark reads the mark.json rel of root without following a link.
func readMark(root *safefs.Dir, rel string) ([]byte, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkSize+1))
	if err == nil && len(b) > maxMarkSize {
		err = fmt.Errorf("larger than %d MiB", maxMarkSize>>20)
	}
	return b, err
}
