// Package rego is dal's Rego engine, built on OPA: it compiles a policy's
// files, refuses decision rules of the wrong shape and evaluates the
// prepared decision query (the contract of package engine). Only
// dal-exec-full and the tests link it; see package engine for why.
package rego

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dal-runtime/dal/internal/policy/engine"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	opaversion "github.com/open-policy-agent/opa/v1/version"
)

// query is the rule every policy defines.
const query = "data.dal.decision"

// inputSchema is docs/schema/policy-input.schema.json (a copy, kept equal
// by a test): the input every policy is type-checked against.
//
//go:embed policy-input.schema.json
var inputSchema []byte

// SchemaName names the input schema in messages.
const SchemaName = "docs/schema/policy-input.schema.json"

// inputSchemas is OPA's schema set for a policy's input: with it, a
// reference to a field the schema does not define (input.request.path
// for input.path) fails to compile instead of never matching.
var inputSchemas = sync.OnceValue(func() *ast.SchemaSet {
	var doc any
	if err := json.Unmarshal(inputSchema, &doc); err != nil {
		panic("the embedded policy input schema is not JSON: " + err.Error())
	}
	ss := ast.NewSchemaSet()
	ss.Put(ast.SchemaRootRef, doc)
	return ss
})

// Engine is OPA.
type Engine struct{}

var _ engine.Engine = Engine{}

// Version is the version of the OPA built in.
func (Engine) Version() string { return opaversion.Version }

// Compile compiles files with OPA's deterministic builtins only.
func (Engine) Compile(ctx context.Context, files []engine.Source) (engine.Query, error) {
	caps := capabilities()
	modules := map[string]*ast.Module{}
	var errs []string
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.Name, string(f.Data), ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps})
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
	c := ast.NewCompiler().WithCapabilities(caps).WithSchemas(inputSchemas())
	c.Compile(modules)
	if c.Failed() {
		return nil, compileError(opaErrors(c.Errors))
	}
	q, err := rego.New(rego.Query(query), rego.Compiler(c), rego.StrictBuiltinErrors(true)).PrepareForEval(ctx)
	if err != nil {
		return nil, compileError(opaErrors(err))
	}
	return prepared{q}, nil
}

type prepared struct{ q rego.PreparedEvalQuery }

// Input converts doc to OPA's values once, so that Eval does not.
func (prepared) Input(doc map[string]any) (any, error) {
	return ast.InterfaceToValue(doc)
}

func (p prepared) Eval(ctx context.Context, input any) (any, bool, error) {
	v, ok := input.(ast.Value)
	if !ok {
		return nil, false, fmt.Errorf("the input is a %T, not one from Input", input)
	}
	rs, err := p.q.Eval(ctx, rego.EvalParsedInput(v))
	if err != nil {
		return nil, false, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, false, nil
	}
	return rs[0].Expressions[0].Value, true, nil
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
			if ref, ok := strings.CutPrefix(e.Message, "undefined ref: "); ok && e.Code == ast.TypeErr && strings.HasPrefix(ref, "input.") {
				ref, _, _ = strings.Cut(ref, "\n")
				out = append(out, at+ref+" is not a field of the policy input defined in "+SchemaName+", so it would never match: use a field the schema defines")
				continue
			}
			msg := e.Message
			if e.Details != nil && e.Code == ast.TypeErr {
				// "match error" alone does not say what did not match.
				msg += " (" + strings.Join(trimmed(e.Details.Lines()), "; ") + ")"
			}
			out = append(out, at+e.Code+": "+msg)
		}
		return out
	}
	return []string{err.Error()}
}

// trimmed is lines without their indentation and alignment ("left  :
// number" is "left: number"), empty ones left out.
func trimmed(lines []string) []string {
	out := lines[:0:0]
	for _, l := range lines {
		if l = strings.ReplaceAll(strings.Join(strings.Fields(l), " "), " :", ":"); l != "" {
			out = append(out, l)
		}
	}
	return out
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
	return errors.New("the policy does not compile: " + strings.Join(errs, "; ") + more)
}

// checkShape finds the decision rules of package dal and refuses those
// whose value is known at compile time to be of the wrong shape: not an
// object, keys other than action and reason, no action, or an action
// other than allow, deny and ask. A value computed at run time is checked
// when evaluated (a wrong one denies, see policy.Decide).
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
		return errors.New("the policy defines no decision: write package dal and a rule decision := {\"action\": \"deny\", \"reason\": \"...\"} if { ... } (see docs/policy.md)")
	}
	return nil
}

// actions are the actions of the contract (policy.Action).
var actions = map[string]bool{"allow": true, "deny": true, "ask": true}

func shapeOf(r *ast.Rule) error {
	at := ""
	if r.Location != nil {
		at = fmt.Sprintf("%s:%d: ", r.Location.File, r.Location.Row)
	}
	h := r.Head
	if h.Value == nil || h.Key != nil || len(h.Args) > 0 {
		return errors.New(at + "decision must be a single object {\"action\": ..., \"reason\": ...}, not a set, a map or a function")
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
				err = fmt.Errorf("%sdecision has the key %v: a decision has action and reason only", at, k)
			case key == "action":
				hasAction = true
				if s, ok := val.Value.(ast.String); ok {
					if !actions[string(s)] {
						err = fmt.Errorf("%sdecision's action %q is unknown: use allow, deny or ask", at, string(s))
					}
				} else if isScalar(val.Value) {
					err = fmt.Errorf("%sdecision's action is %v: use \"allow\", \"deny\" or \"ask\"", at, val)
				}
			case key == "reason":
				if _, ok := val.Value.(ast.String); !ok && isScalar(val.Value) {
					err = fmt.Errorf("%sdecision's reason is %v: use a string", at, val)
				}
			}
		})
		if err != nil {
			return err
		}
		if !hasAction {
			return errors.New(at + "decision has no action: add \"action\": \"allow\", \"deny\" or \"ask\"")
		}
	case ast.Var, ast.Ref, ast.Call, *ast.ObjectComprehension:
		// computed: checked when evaluated
	default:
		return fmt.Errorf("%sdecision is %v: it must be an object {\"action\": ..., \"reason\": ...}", at, h.Value)
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
