package cli

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/replay"
	ucli "github.com/urfave/cli/v2"
)

// --json on the commands that print a verdict or a listing: a switch that
// prints one JSON document on stdout, as replay's and status's do; the text
// the command prints otherwise goes to stderr, or nowhere for a listing.
// Each document has a schema in docs/schema/ (docs/reference.md), checked
// against the output in jsonout_test.go.

// jsonFlag is the --json switch; what names what is printed.
func jsonFlag(what string) ucli.Flag {
	return &ucli.BoolFlag{Name: "json", Usage: "print " + what + " as JSON on stdout (docs/schema/); the text goes to stderr"}
}

// writeJSON writes v to w, indented, ending with a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// verifyJSON is dal-exec verify --json (docs/schema/verify.schema.json).
type verifyJSON struct {
	Bundle        string             `json:"bundle"`
	OK            bool               `json:"ok"`
	FormatVersion int                `json:"format_version,omitempty"`
	Files         int                `json:"files,omitempty"`
	Mode          string             `json:"mode,omitempty"`
	Signer        *verifySignerJSON  `json:"signer,omitempty"`
	Replays       *verifyReplaysJSON `json:"replays,omitempty"`
	Unverified    []verifyUnverified `json:"unverified"`
	Warnings      []string           `json:"warnings"`
	Incomplete    []string           `json:"incomplete,omitempty"`
	Error         *verifyErrorJSON   `json:"error,omitempty"`
}

type verifySignerJSON struct {
	Fingerprint string `json:"fingerprint"`
	Trusted     bool   `json:"trusted"`
	Source      string `json:"source,omitempty"`
}

type verifyReplaysJSON struct {
	Count       int    `json:"count"`
	MatchStatus string `json:"match_status"`
}

type verifyUnverified struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

type verifyErrorJSON struct {
	Kind    string `json:"kind"`
	File    string `json:"file,omitempty"`
	Message string `json:"message"`
}

// verifiedJSON is the verdict on an intact bundle.
func verifiedJSON(path string, b *bundle.Bundle) verifyJSON {
	st := b.ReplayStatus()
	v := verifyJSON{Bundle: path, OK: true, FormatVersion: b.Manifest.Dal.FormatVersion, Files: len(b.Manifest.Dal.Files),
		Mode:       b.Manifest.Config.ExecutionMode,
		Signer:     &verifySignerJSON{Fingerprint: b.Signer.Fingerprint, Trusted: b.Signer.Trusted, Source: b.Signer.Source},
		Replays:    &verifyReplaysJSON{Count: st.ReplayCount, MatchStatus: st.MatchStatus},
		Unverified: []verifyUnverified{}, Warnings: append([]string{}, b.Warnings...), Incomplete: b.Manifest.Dal.Incomplete}
	for _, u := range b.Unverified {
		v.Unverified = append(v.Unverified, verifyUnverified{File: u.File, Reason: u.Reason})
	}
	return v
}

// refusedJSON is the verdict on a bundle that did not verify, or nil when
// err is not about the bundle (a usage error, an unreadable key file).
func refusedJSON(path string, err error) *verifyJSON {
	var be *bundle.Error
	if !errors.As(err, &be) {
		return nil
	}
	kind := "corrupt"
	for _, k := range []struct {
		err  error
		name string
	}{{bundle.ErrNotBundle, "not_bundle"}, {bundle.ErrVersion, "version"}, {bundle.ErrUntrusted, "untrusted"}, {bundle.ErrLimit, "limit"}} {
		if errors.Is(be, k.err) {
			kind = k.name
		}
	}
	return &verifyJSON{Bundle: path, Unverified: []verifyUnverified{}, Warnings: []string{},
		Error: &verifyErrorJSON{Kind: kind, File: be.File, Message: be.Error()}}
}

// diffJSON is dal-exec diff --json (docs/schema/diff.schema.json).
type diffJSON struct {
	A          string              `json:"a"`
	B          string              `json:"b"`
	Same       bool                `json:"same"`
	Components []diffComponentJSON `json:"components"`
}

type diffComponentJSON struct {
	Name  string `json:"name"`
	Same  bool   `json:"same"`
	First string `json:"first,omitempty"`
}

func newDiffJSON(a, b string, cs []replay.Component) diffJSON {
	d := diffJSON{A: a, B: b, Same: true, Components: []diffComponentJSON{}}
	for _, x := range cs {
		c := diffComponentJSON{Name: x.Name, Same: x.Match}
		if !x.Match {
			c.First, d.Same = x.First, false
		}
		d.Components = append(d.Components, c)
	}
	return d
}
