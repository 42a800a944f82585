// Package engine is the contract between package policy and the Rego
// engine that compiles and evaluates policies (package rego, built on OPA).
// It lets dal-exec leave the engine out: OPA's packages take about 3 ms to
// initialise at every start, and only the commands that evaluate a policy
// need them. Those run in dal-exec-full, which registers the engine
// (policy.SetEngine); dal-exec hands such a command to it.
package engine

import "context"

// Query is the prepared decision query, data.dal.decision; safe for
// concurrent use.
type Query interface {
	// Input converts an input document (JSON-like values) for Eval.
	Input(doc map[string]any) (any, error)
	// Eval evaluates the decision for an input from Input: the decision's
	// value as JSON-like values, and whether it was defined.
	Eval(ctx context.Context, input any) (value any, defined bool, err error)
}

// Source is one file of a policy.
type Source struct {
	Name string // as error messages name it
	Data []byte
}

// Engine compiles policies.
type Engine interface {
	// Version names the engine's release (OPA's), kept in the audit.
	Version() string
	// Compile parses and compiles files, checks the shape of their
	// decision rules and prepares the query. Its error is a sentence for
	// the user naming the file and line.
	Compile(ctx context.Context, files []Source) (Query, error)
}
