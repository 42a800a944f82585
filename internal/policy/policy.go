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

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	opaversion "github.com/open-policy-agent/opa/v1/version"
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
	query   rego.PreparedEvalQuery
}

// OPAVersion is the version of the Rego engine built in.
func OPAVersion() string { return opaversion.Version }

// Query is the rule every policy defines.
const Query = "data.dal.decision"

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
// and prepares its query.
func Compile(ctx context.Context, files []File, def Action) (*Policy, error) {
	if def != Allow && def != Deny {
		return nil, &Error{Msg: fmt.Sprintf("--policy-default %s: use allow or deny", def)}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	caps := capabilities()
	modules := map[string]*ast.Module{}
	var errs []string
	for i := range files {
		f := &files[i]
		sum := sha256.Sum256(f.Source)
		f.SHA256 = hex.EncodeToString(sum[:])
		m, err := ast.ParseModuleWithOpts(f.Name, string(f.Source), ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps})
		if err != nil {
			errs = append(errs, opaErrors(err)...)
			continue
		}
		modules[f.Name] = m
	}
	if len(errs) > 0 {
		return nil, compileError(errs)
	}
	if err := checkShape(modules); err != nil {
		return nil, err
	}
	c := ast.NewCompiler().WithCapabilities(caps)
	c.Compile(modules)
	if c.Failed() {
		return nil, compileError(opaErrors(c.Errors))
	}
	q, err := rego.New(rego.Query(Query), rego.Compiler(c), rego.StrictBuiltinErrors(true)).PrepareForEval(ctx)
	if err != nil {
		return nil, compileError(opaErrors(err))
	}
	return &Policy{Files: files, Default: def, query: q}, nil
}

// capabilities are OPA's builtins less the nondeterministic ones
// (http.send, time.now_ns, rand.intn, uuid.rfc4122, net.lookup_ip_addr,
// opa.runtime...): a decision depends on its input alone, so a replay
// re-evaluates it to the same answer, and a policy never reaches the
// network from inside dal-exec.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	var keep []*ast.Builtin
	for _, b := range c.Builtins {
		if !b.Nondeterministic {
			keep = append(keep, b)
		}
	}
	c.Builtins = keep
	return c
}

func opaErrors(err error) []string {
	var es ast.Errors
	if errors.As(err, &es) {
		out := make([]string, 0, len(es))
		for _, e := range es {
			at := ""
			if e.Location != nil {
				at = fmt.Sprintf("%s:%d: ", e.Location.File, e.Location.Row)
			}
			out = append(out, at+e.Code+": "+e.Message)
		}
		return out
	}
	return []string{err.Error()}
}

func compileError(errs []string) error {
	const most = 5
	more := ""
	if len(errs) > most {
		more = fmt.Sprintf(" (and %d more)", len(errs)-most)
		errs = errs[:most]
	}
	for i, e := range errs {
		errs[i] = strings.ReplaceAll(e, "\n\t", " ")
	}
	return &Error{Msg: "the policy does not compile: " + strings.Join(errs, "; ") + more}
}

// checkShape finds the decision rules of package dal and refuses those
// whose value is known at compile time to be of the wrong shape: not an
// object, keys other than action and reason, no action, or an action
// other than allow, deny and ask. A value computed at run time is checked
// when evaluated (a wrong one denies, see Decide).
func checkShape(modules map[string]*ast.Module) error {
	found := false
	names := make([]string, 0, len(modules))
	for n := range modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := modules[n]
		if m.Package.Path.String() != "data.dal" {
			continue
		}
		for _, r := range m.Rules {
			if r.Head.Ref().String() != "decision" {
				continue
			}
			found = true
			for rr := r; rr != nil; rr = rr.Else {
				if err := shapeOf(rr); err != nil {
					return err
				}
			}
		}
	}
	if !found {
		return &Error{Msg: "the policy defines no decision: write package dal and a rule decision := {\"action\": \"deny\", \"reason\": \"...\"} if { ... } (see docs/policy.md)"}
	}
	return nil
}

func shapeOf(r *ast.Rule) error {
	at := ""
	if r.Location != nil {
		at = fmt.Sprintf("%s:%d: ", r.Location.File, r.Location.Row)
	}
	h := r.Head
	if h.Value == nil || h.Key != nil || len(h.Args) > 0 {
		return &Error{Msg: at + "decision must be a single object {\"action\": ..., \"reason\": ...}, not a set, a map or a function"}
	}
	switch v := h.Value.Value.(type) {
	case ast.Object:
		var err error
		hasAction := false
		v.Foreach(func(k, val *ast.Term) {
			if err != nil {
				return
			}
			key, ok := k.Value.(ast.String)
			switch {
			case !ok || (key != "action" && key != "reason"):
				err = &Error{Msg: fmt.Sprintf("%sdecision has the key %v: a decision has action and reason only", at, k)}
			case key == "action":
				hasAction = true
				if s, ok := val.Value.(ast.String); ok {
					if _, perr := ParseAction(string(s)); perr != nil {
						err = &Error{Msg: fmt.Sprintf("%sdecision's action %q is unknown: use allow, deny or ask", at, string(s))}
					}
				} else if isScalar(val.Value) {
					err = &Error{Msg: fmt.Sprintf("%sdecision's action is %v: use \"allow\", \"deny\" or \"ask\"", at, val)}
				}
			case key == "reason":
				if _, ok := val.Value.(ast.String); !ok && isScalar(val.Value) {
					err = &Error{Msg: fmt.Sprintf("%sdecision's reason is %v: use a string", at, val)}
				}
			}
		})
		if err != nil {
			return err
		}
		if !hasAction {
			return &Error{Msg: at + "decision has no action: add \"action\": \"allow\", \"deny\" or \"ask\""}
		}
	case ast.Var, ast.Ref, ast.Call, *ast.ObjectComprehension:
		// computed: checked when evaluated
	default:
		return &Error{Msg: fmt.Sprintf("%sdecision is %v: it must be an object {\"action\": ..., \"reason\": ...}", at, h.Value)}
	}
	return nil
}

func isScalar(v ast.Value) bool {
	switch v.(type) {
	case ast.String, ast.Number, ast.Boolean, ast.Null, *ast.Array, ast.Set, ast.Object:
		return true
	}
	return false
}

// Decide evaluates the policy for input. An undefined decision is the
// default action; a decision of the wrong shape, or an evaluation error
// (a conflict, a builtin's error), is a deny whose reason says so: the
// gate fails closed.
func (p *Policy) Decide(ctx context.Context, input ast.Value) Decision {
	rs, err := p.query.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return Decision{Action: Deny, Reason: "the policy failed: " + oneLine(err.Error()), Defined: true}
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return Decision{Action: p.Default}
	}
	d, err := decisionOf(rs[0].Expressions[0].Value)
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
