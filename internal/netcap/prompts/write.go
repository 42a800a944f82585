package prompts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Marshal is a prompt's file content: indented JSON and a newline.
func Marshal(p *Prompt) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("prompt seq %d: %w", p.Seq, err)
	}
	return buf.Bytes(), nil
}

// Dir is the bundle's directory of prompt files.
const Dir = "prompts"

// FileName is the name of the nth prompt file (n from 1): 0001.json, ...,
// 9999.json, 10000.json.
func FileName(n int) string { return fmt.Sprintf("%04d.json", n) }

// Write writes ps into dir (created if needed) as 0001.json, 0002.json,
// ... in seq order. It writes nothing for no prompts.
func Write(dir string, ps []*Prompt) error {
	if len(ps) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write prompts: %w", err)
	}
	sorted := slices.Clone(ps)
	slices.SortStableFunc(sorted, func(a, b *Prompt) int { return a.Seq - b.Seq })
	for i, p := range sorted {
		b, err := Marshal(p)
		if err != nil {
			return fmt.Errorf("write prompts: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName(i+1)), b, 0o644); err != nil {
			return fmt.Errorf("write prompts: %w", err)
		}
	}
	return nil
}

// Totals sums the input and output tokens of ps.
func Totals(ps []*Prompt) (in, out int) {
	for _, p := range ps {
		in += p.Usage.InputTokens
		out += p.Usage.OutputTokens
	}
	return in, out
}
