package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// In a bundle, policy.json is the audit and policy/ holds the policy's
// files as they were: both under the manifest's signature.
const (
	AuditFile = "policy.json"
	SourceDir = "policy"
)

// AuditFormat is policy.json's format version.
const AuditFormat = 1

// Audit is policy.json: the policy (its files by name and SHA-256, the
// OPA version that evaluated it, the default and the ask timeout) and
// every decision of the run, with who approved or denied each ask.
type Audit struct {
	Format     int      `json:"format"`
	OPAVersion string   `json:"opa_version"`
	Default    Action   `json:"default"`
	AskTimeout string   `json:"ask_timeout"`
	Files      []File   `json:"files"`
	Decisions  []Record `json:"decisions"`
}

// Audit is the gate's audit so far.
func (g *Gate) Audit() Audit {
	return Audit{Format: AuditFormat, OPAVersion: OPAVersion(), Default: g.p.Default, AskTimeout: g.o.AskTimeout.String(),
		Files: g.p.Files, Decisions: g.Records()}
}

// RulesActive names the policy for the manifest's config.agent.rules_active:
// its files as the bundle holds them.
func (p *Policy) RulesActive() []string {
	out := make([]string, len(p.Files))
	for i, f := range p.Files {
		out[i] = SourceDir + "/" + f.Name
	}
	return out
}

// WriteAudit writes policy.json and the policy's files into the bundle
// directory dir.
func WriteAudit(dir string, a Audit, p *Policy) error {
	for _, f := range p.Files {
		if !safeName(f.Name) {
			return fmt.Errorf("policy file name %q cannot be stored in a bundle", f.Name)
		}
		dst := filepath.Join(dir, SourceDir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, f.Source, 0o644); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, AuditFile), append(b, '\n'), 0o644)
}

// safeName reports whether a file name stays below its directory.
func safeName(n string) bool {
	return n != "" && !path.IsAbs(n) && path.Clean(n) == n && n != "." && !strings.HasPrefix(n, "../") && n != ".." && !strings.Contains(n, "\\")
}

// ReadAudit reads a bundle's policy.json and compiles the recorded policy
// from its files; read reads a file of the bundle (which checked it
// against the signed manifest). The audit is nil when the bundle has none.
func ReadAudit(ctx context.Context, read func(name string) ([]byte, error)) (*Audit, *Policy, error) {
	b, err := read(AuditFile)
	if errors.Is(err, fs.ErrNotExist) { // wrapped by the bundle reader: os.IsNotExist would not see it
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var a Audit
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, nil, fmt.Errorf("the bundle's %s is not valid: %w", AuditFile, err)
	}
	if a.Format != AuditFormat {
		return nil, nil, fmt.Errorf("the bundle's %s has format %d; this dal reads format %d", AuditFile, a.Format, AuditFormat)
	}
	if len(a.Files) == 0 {
		return nil, nil, fmt.Errorf("the bundle's %s names no policy file", AuditFile)
	}
	files := make([]File, len(a.Files))
	for i, f := range a.Files {
		if !safeName(f.Name) {
			return nil, nil, fmt.Errorf("the bundle's %s names the file %q, outside %s/", AuditFile, f.Name, SourceDir)
		}
		src, err := read(SourceDir + "/" + f.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("the bundle's policy file %s: %w", f.Name, err)
		}
		files[i] = File{Name: f.Name, Source: src}
	}
	def := a.Default
	if def != Allow && def != Deny {
		return nil, nil, fmt.Errorf("the bundle's %s has the default %q", AuditFile, def)
	}
	p, err := Compile(ctx, files, def)
	if err != nil {
		return nil, nil, fmt.Errorf("the bundle's recorded policy: %w", err)
	}
	for i := range p.Files {
		if p.Files[i].SHA256 != a.Files[i].SHA256 {
			return nil, nil, fmt.Errorf("the bundle's policy file %s does not match the SHA-256 in %s", p.Files[i].Name, AuditFile)
		}
	}
	return &a, p, nil
}
