package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dal-runtime/dal/internal/policy/engine"
)

// Action is what a decision says to do with a call.
type Action string

// The actions of the contract.
const (
	Allow Action = "allow"
	Deny  Action = "deny"
	Ask   Action = "ask"
)

// ParseAction reads an action; --policy-default takes allow or deny only.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case Allow, Deny, Ask:
		return a, nil
	}
	return "", fmt.Errorf("unknown action %q: use allow, deny or ask", s)
}

// Decision is what the policy said about one input.
type Decision struct {
	Action Action `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Defined is false when the policy's decision was undefined for the
	// input and the default applied.
	Defined bool `json:"defined"`
}

// File is one source file of a policy.
type File struct {
	// Name is the file's path relative to the policy's root (its base
	// name for a single file), with slashes; errors name it.
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Source []byte `json:"-"`
}

// Policy is a compiled policy, its query prepared: evaluating it is safe
// for concurrent use.
type Policy struct {
	// Path is where it was loaded from ("" when built from sources).
	Path    string
	Files   []File
	Default Action
	query   engine.Query
}

// The Rego engine: dal-exec-full registers it (package rego); dal-exec,
// which starts 3 ms sooner without it, has none and hands the commands
// that evaluate a policy to dal-exec-full (see package engine).
var theEngine engine.Engine

// SetEngine registers the Rego engine, before any policy is loaded.
func SetEngine(e engine.Engine) { theEngine = e }

// HaveEngine says whether a Rego engine is registered.
func HaveEngine() bool { return theEngine != nil }

// ErrNoEngine is what loading or compiling a policy returns in a binary
// without the Rego engine: dal-exec's command line runs the command again
// in dal-exec-full.
var ErrNoEngine = errors.New("this command evaluates a Rego policy, and this dal-exec is built without the Rego engine: run it with dal-exec-full, installed beside dal-exec by make install")

// OPAVersion is the version of the Rego engine registered ("" without).
func OPAVersion() string {
	if theEngine == nil {
		return ""
	}
	return theEngine.Version()
}

// Error is a policy that cannot be used: it does not compile, or its
// decision has the wrong shape. Its message carries OPA's message and the
// file and line.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// maxFile bounds one policy file.
const maxFile = 1 << 20

// Load reads the policy at path, a .rego file or a directory whose .rego
// files (recursively, *_test.rego left out) form it, and compiles it.
// def is the action where the decision is undefined (allow or deny).
func Load(ctx context.Context, path string, def Action) (*Policy, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("policy %s: %v: pass a .rego file or a directory of them", path, unwrap(err))}
	}
	var files []File
	add := func(p, name string) error {
		b, err := os.ReadFile(p)
		if err != nil {
			return &Error{Msg: fmt.Sprintf("policy %s: %v", p, unwrap(err))}
		}
		if len(b) > maxFile {
			return &Error{Msg: fmt.Sprintf("policy %s is larger than %d bytes", p, maxFile)}
		}
		files = append(files, File{Name: filepath.ToSlash(name), Source: b})
		return nil
	}
	if fi.IsDir() {
		err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && strings.HasSuffix(p, ".rego") && !strings.HasSuffix(p, "_test.rego") {
				rel, _ := filepath.Rel(path, p)
				return add(p, rel)
			}
			return nil
		})
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, pe
			}
			return nil, &Error{Msg: fmt.Sprintf("policy %s: %v", path, err)}
		}
		if len(files) == 0 {
			return nil, &Error{Msg: fmt.Sprintf("policy directory %s holds no .rego file", path)}
		}
	} else {
		if !strings.HasSuffix(path, ".rego") {
			return nil, &Error{Msg: fmt.Sprintf("policy %s is not a .rego file: pass a .rego file or a directory of them", path)}
		}
		if err := add(path, filepath.Base(path)); err != nil {
			return nil, err
		}
	}
	p, err := Compile(ctx, files, def)
	if errors.Is(err, ErrNoEngine) {
		return nil, err
	}
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("policy %s: %v", path, err)}
	}
	p.Path = path
	return p, nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Compile compiles files (Source set; SHA256 is filled in) into a policy
// and prepares its query; [ErrNoEngine] without a Rego engine.
func Compile(ctx context.Context, files []File, def Action) (*Policy, error) {
	if def != Allow && def != Deny {
		return nil, &Error{Msg: fmt.Sprintf("--policy-default %s: use allow or deny", def)}
	}
	if theEngine == nil {
		return nil, ErrNoEngine
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	srcs := make([]engine.Source, len(files))
	for i := range files {
		f := &files[i]
		sum := sha256.Sum256(f.Source)
		f.SHA256 = hex.EncodeToString(sum[:])
		srcs[i] = engine.Source{Name: f.Name, Data: f.Source}
	}
	q, err := theEngine.Compile(ctx, srcs)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return &Policy{Files: files, Default: def, query: q}, nil
}

// input converts in for Decide.
func (p *Policy) input(in *Input) (any, error) {
	return p.query.Input(in.Doc)
}

// Decide evaluates the policy for input. An undefined decision is the
// default action; a decision of the wrong shape, or an evaluation error
// (a conflict, a builtin's error), is a deny whose reason says so: the
// gate fails closed. input is from [Policy.input].
func (p *Policy) Decide(ctx context.Context, input any) Decision {
	v, defined, err := p.query.Eval(ctx, input)
	if err != nil {
		return Decision{Action: Deny, Reason: "the policy failed: " + oneLine(err.Error()), Defined: true}
	}
	if !defined {
		return Decision{Action: p.Default}
	}
	d, err := decisionOf(v)
	if err != nil {
		return Decision{Action: Deny, Reason: "the policy's decision " + err.Error(), Defined: true}
	}
	return d
}

func decisionOf(v any) (Decision, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Decision{}, fmt.Errorf("is not an object but %T", v)
	}
	d := Decision{Defined: true}
	for k, x := range m {
		switch k {
		case "action":
			s, _ := x.(string)
			a, err := ParseAction(s)
			if err != nil {
				return Decision{}, fmt.Errorf("has an unknown action %v", x)
			}
			d.Action = a
		case "reason":
			s, ok := x.(string)
			if !ok {
				return Decision{}, fmt.Errorf("has a reason that is not a string")
			}
			d.Reason = s
		default:
			return Decision{}, fmt.Errorf("has the key %q: only action and reason", k)
		}
	}
	if d.Action == "" {
		return Decision{}, errors.New("has no action")
	}
	return d, nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
