package record

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Secrets and kept variables (docs/design.md §6).
//
// A variable passed with --keep-env is either a secret — its name contains
// KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL (any case), or it was named
// with --secret-env — or a plain setting (a base URL, a model name). Plain
// settings are stored by value in env.json and given back on replay, so a
// bundle replays by itself on any machine. Secrets are never stored, not
// even as a hash: env.json lists their names only, and the replayed agent
// gets a stable placeholder (Placeholder) so that SDKs that insist on a key
// still start. Their values are scrubbed from every file of the bundle the
// run produced (logs, fs-diff content, network.har, prompts/, iterations/)
// and replaced by Redacted; env.json's scrubbed list names those files.
// Replay scrubs the placeholder from its own output the same way, so the
// comparison holds.
//
// Limits: a secret shorter than minSecret bytes is not scrubbed by value
// (it would match too much; dal says so on its log); a value that the agent
// transforms (base64, split across writes of different files) is not
// recognised; changes.json keeps the SHA-256 of a scrubbed file's real
// content, which revert needs to check the workspace.

// Redacted replaces a secret's value wherever it occurs in a bundle.
const Redacted = "[REDACTED]"

// minSecret is the shortest value scrubbed by value.
const minSecret = 4

// secretWords mark a variable name as a credential.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"}

// IsSecretName reports whether the variable name looks like a credential,
// or is one of extra (--secret-env).
func IsSecretName(name string, extra []string) bool {
	for _, e := range extra {
		if e == name {
			return true
		}
	}
	up := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// Placeholder is the value a replayed agent gets for the secret name.
func Placeholder(name string) string { return "dal-placeholder-" + name }

// Scrubber replaces secret values by Redacted.
type Scrubber struct {
	values [][]byte // longest first, so a value that contains another goes first
}

// NewScrubber scrubs values; those shorter than minSecret are left alone.
func NewScrubber(values []string) *Scrubber {
	s := &Scrubber{}
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) < minSecret || seen[v] {
			continue
		}
		seen[v] = true
		s.values = append(s.values, []byte(v))
	}
	sort.Slice(s.values, func(i, j int) bool { return len(s.values[i]) > len(s.values[j]) })
	return s
}

// Bytes returns b with every secret value replaced, and whether any was.
func (s *Scrubber) Bytes(b []byte) ([]byte, bool) {
	if s == nil {
		return b, false
	}
	hit := false
	for _, v := range s.values {
		if bytes.Contains(b, v) {
			b = bytes.ReplaceAll(b, v, []byte(Redacted))
			hit = true
		}
	}
	return b, hit
}

// String returns v with every secret value replaced.
func (s *Scrubber) String(v string) string {
	b, _ := s.Bytes([]byte(v))
	return string(b)
}

// maxScrubFile is the largest file scrubbed in memory; a larger one that
// holds a secret is reported instead of rewritten.
const maxScrubFile = 256 << 20

// tree scrubs every regular file below root (dal's own staging: the
// bundle being written), skipping the top-level directories in skip. It
// never follows a symlink (the agent's symlinks are content here) and
// returns the scrubbed files' slash paths, relative to root.
func (s *Scrubber) tree(root string, skip ...string) ([]string, error) {
	if s == nil || len(s.values) == 0 {
		return nil, nil
	}
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for _, k := range skip {
			if rel == k {
				return filepath.SkipDir
			}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		hit, err := s.file(p)
		if err != nil {
			return fmt.Errorf("scrub secrets from %s: %w", rel, err)
		}
		if hit {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// file rewrites one regular file (opened without following a symlink)
// when it holds a secret, keeping its mode. The new content goes to a new
// file renamed over the old one: bundle files may be hard links shared
// with the copy that apply writes to the workspace, which keeps the real
// content.
func (s *Scrubber) file(p string) (bool, error) {
	b, err := ReadNoFollow(p)
	if err != nil {
		return false, err
	}
	out, hit := s.Bytes(b)
	if !hit {
		return false, nil
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	tmp := p + ".dal-scrub"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, fi.Mode().Perm())
	if err != nil {
		return false, err
	}
	_, err = f.Write(out)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp, fi.ModTime(), fi.ModTime())
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// splitKept sorts the kept variables of a run into plain settings (stored
// by value) and secrets (names only), with the secret values to scrub.
func splitKept(kept map[string]string, secretEnv []string) (plain map[string]string, secrets []string, values []string) {
	plain = map[string]string{}
	for k, v := range kept {
		if IsSecretName(k, secretEnv) {
			secrets = append(secrets, k)
			values = append(values, v)
		} else {
			plain[k] = v
		}
	}
	sort.Strings(secrets)
	return plain, secrets, values
}

// ReadNoFollow reads a regular file of at most 256 MiB without following
// a symlink.
func ReadNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > maxScrubFile {
		return nil, fmt.Errorf("%s is %d bytes, more than dal scrubs (%d)", p, fi.Size(), maxScrubFile)
	}
	b := make([]byte, fi.Size())
	_, err = io.ReadFull(f, b)
	return b, err
}

// keptSecretValues are the values, in dal-exec's environment, of the
// variables --keep-env passes (a name, or a PREFIX_* pattern) that are
// secrets.
func keptSecretValues(keep, secretEnv []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if v == "" || !IsSecretName(k, secretEnv) {
			continue
		}
		for _, p := range keep {
			if p == k || (strings.HasSuffix(p, "*") && strings.HasPrefix(k, strings.TrimSuffix(p, "*"))) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}
