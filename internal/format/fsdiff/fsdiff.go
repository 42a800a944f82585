// Package fsdiff is the format of a bundle's workspace changes:
// fs-diff/changes.json (a list of [Change]), the mirror paths under
// fs-diff/files/ and fs-pre/files/ ([MirrorPath]), and env.json's list of
// what a capture could not hold ([Uncaptured]). Package sandbox computes
// and applies the changes; a reader of bundles (dal-exec show) needs
// only this package. It imports nothing of dal.
package fsdiff

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Operations of a [Change].
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpDeleted  = "deleted"
)

// Kinds of entries. Fifos, sockets and devices are not captured (see
// [Uncaptured]).
const (
	KindFile    = "file"
	KindDir     = "dir"
	KindSymlink = "symlink"
)

// What [Change.Stripped] lists.
const (
	StrippedSetuid     = "setuid"
	StrippedSetgid     = "setgid"
	StrippedCapability = "capability" // the security.capability xattr
)

// ModeBits are the mode bits compared, stored and restored.
const ModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Entry is one file, directory or symlink's state.
type Entry struct {
	Kind       string
	Mode       fs.FileMode // permission bits with setuid, setgid, sticky
	Hash       string      // "sha256:<hex>" of a file's content or a symlink's target; "" for a directory
	Size       int64       // bytes of content, or of the target
	LinkTarget string
}

// Change is one path the run changed. For created and modified entries
// Kind, Mode, Hash, Size and LinkTarget describe the entry after the run
// and Pre (modified only) the entry before; for deleted ones they describe
// the entry before the run. A deleted directory is listed with every entry
// below it.
//
// Path, LinkTarget and RenamedFrom are bytes, as the file system has them;
// one that is not UTF-8 is stored in changes.json with a *_b64 companion
// (see [Change.MarshalJSON]).
type Change struct {
	Path       string // relative to the workspace, slash-separated, clean
	Op         string // OpCreated, OpModified or OpDeleted
	Kind       string
	Mode       fs.FileMode
	Hash       string
	Size       int64
	LinkTarget string
	Pre        *Entry // modified only
	// RenamedFrom, on a created file, names the one deleted file with the
	// same content: the run most likely renamed it.
	RenamedFrom string
	// Stripped lists what the run gave the file that dal does not apply
	// (StrippedSetuid, StrippedSetgid, StrippedCapability): Mode is without
	// it, and the exported copy has neither the bits nor the xattr.
	Stripped []string
}

// Entry returns the fields of c that describe its entry.
func (c Change) Entry() Entry {
	return Entry{Kind: c.Kind, Mode: c.Mode, Hash: c.Hash, Size: c.Size, LinkTarget: c.LinkTarget}
}

// Before is the entry at c.Path before the run (nil: none).
func (c Change) Before() *Entry {
	switch c.Op {
	case OpModified:
		return c.Pre
	case OpDeleted:
		e := c.Entry()
		return &e
	}
	return nil
}

// After is the entry at c.Path after the run (nil: none).
func (c Change) After() *Entry {
	if c.Op == OpDeleted {
		return nil
	}
	e := c.Entry()
	return &e
}

// Uncaptured is an entry the run left that a capture cannot hold: a fifo,
// a socket or a device node. It is listed, not exported or applied.
type Uncaptured struct {
	Path string `json:"path"` // as Change.Path
	Kind string `json:"kind"` // "fifo", "socket", "char device" or "block device"
}

// MarshalJSON writes Path as Change does.
func (u Uncaptured) MarshalJSON() ([]byte, error) {
	p, p64 := jsonName(u.Path)
	return json.Marshal(struct {
		Path    string `json:"path"`
		PathB64 string `json:"path_b64,omitempty"`
		Kind    string `json:"kind"`
	}{p, p64, u.Kind})
}

// jsonEntry is the on-disk form: modes as octal strings ("0755", "4755").
type jsonEntry struct {
	Kind          string `json:"kind"`
	Mode          string `json:"mode"`
	Hash          string `json:"hash,omitempty"`
	Size          int64  `json:"size"`
	LinkTarget    string `json:"link_target,omitempty"`
	LinkTargetB64 string `json:"link_target_b64,omitempty"`
}

type jsonChange struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Op      string `json:"op"`
	jsonEntry
	Pre            *jsonEntry `json:"pre,omitempty"`
	RenamedFrom    string     `json:"renamed_from,omitempty"`
	RenamedFromB64 string     `json:"renamed_from_b64,omitempty"`
	Stripped       []string   `json:"stripped,omitempty"`
}

// jsonName encodes a name for JSON. A UTF-8 name is itself (b64 empty).
// Another is written as its text with every byte that is not part of a
// UTF-8 sequence as "%XX" (for people and tools that show it), and as the
// standard base64 of its bytes in b64, which is what is read back.
func jsonName(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, "%%%02X", s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String(), base64.StdEncoding.EncodeToString([]byte(s))
}

// nameFromJSON reverses jsonName: b64, when set, must decode to a name
// that is not UTF-8 and whose text form is text.
func nameFromJSON(field, text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%s_b64 is not base64", field)
	}
	s := string(raw)
	if t, b := jsonName(s); b == "" || t != text {
		return "", fmt.Errorf("%s_b64 does not match %s (it is set only for a name that is not UTF-8, whose %s shows it)", field, field, field)
	}
	return s, nil
}

func toJSONEntry(e Entry) jsonEntry {
	lt, lt64 := jsonName(e.LinkTarget)
	return jsonEntry{Kind: e.Kind, Mode: fmt.Sprintf("%04o", UnixMode(e.Mode)), Hash: e.Hash, Size: e.Size, LinkTarget: lt, LinkTargetB64: lt64}
}

func fromJSONEntry(j jsonEntry) (Entry, error) {
	m, err := strconv.ParseUint(j.Mode, 8, 32)
	if err != nil || m > 0o7777 {
		return Entry{}, fmt.Errorf("mode %q is not an octal permission", j.Mode)
	}
	lt, err := nameFromJSON("link_target", j.LinkTarget, j.LinkTargetB64)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Kind: j.Kind, Mode: GoMode(uint32(m)), Hash: j.Hash, Size: j.Size, LinkTarget: lt}, nil
}

// MarshalJSON writes modes as octal strings, and a name that is not UTF-8
// with its base64 beside it: {"path": "caf%E9", "path_b64": "Y2Fm6Q=="}
// (likewise link_target and renamed_from). Readers that know only "path"
// see the escaped text.
func (c Change) MarshalJSON() ([]byte, error) {
	p, p64 := jsonName(c.Path)
	rf, rf64 := jsonName(c.RenamedFrom)
	j := jsonChange{Path: p, PathB64: p64, Op: c.Op, jsonEntry: toJSONEntry(c.Entry()), RenamedFrom: rf, RenamedFromB64: rf64, Stripped: c.Stripped}
	if c.Pre != nil {
		pe := toJSONEntry(*c.Pre)
		j.Pre = &pe
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change) UnmarshalJSON(b []byte) error {
	var j jsonChange
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	e, err := fromJSONEntry(j.jsonEntry)
	if err != nil {
		return err
	}
	p, err := nameFromJSON("path", j.Path, j.PathB64)
	if err != nil {
		return err
	}
	rf, err := nameFromJSON("renamed_from", j.RenamedFrom, j.RenamedFromB64)
	if err != nil {
		return err
	}
	*c = Change{Path: p, Op: j.Op, Kind: e.Kind, Mode: e.Mode, Hash: e.Hash, Size: e.Size, LinkTarget: e.LinkTarget, RenamedFrom: rf, Stripped: j.Stripped}
	if j.Pre != nil {
		pe, err := fromJSONEntry(*j.Pre)
		if err != nil {
			return err
		}
		c.Pre = &pe
	}
	return nil
}

// UnixMode and GoMode convert between fs.FileMode bits and chmod(2) bits.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= sISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= sISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= sISVTX
	}
	return u
}

// GoMode is UnixMode's inverse.
func GoMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&sISUID != 0 {
		m |= fs.ModeSetuid
	}
	if u&sISGID != 0 {
		m |= fs.ModeSetgid
	}
	if u&sISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// chmod(2)'s setuid, setgid and sticky bits (the same on every Linux
// architecture).
const (
	sISUID = 0o4000
	sISGID = 0o2000
	sISVTX = 0o1000
)

// mirrorPrefix marks an encoded component of a mirror path.
const mirrorPrefix = ".dal-b64-"

// MirrorPath is where the copy of the changed path rel lies in a mirror
// (fs-diff/files/, fs-pre/files/): rel itself, except that a component
// that is not UTF-8 — or that begins with ".dal-b64-", so the mapping
// stays one to one — is stored as ".dal-b64-" and the unpadded URL-safe
// base64 of its bytes, because a bundle holds UTF-8 names only.
func MirrorPath(rel string) string {
	if utf8.ValidString(rel) && !strings.Contains(rel, mirrorPrefix) {
		return rel
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		if !utf8.ValidString(c) || strings.HasPrefix(c, mirrorPrefix) {
			parts[i] = mirrorPrefix + base64.RawURLEncoding.EncodeToString([]byte(c))
		}
	}
	return strings.Join(parts, "/")
}

// isSHA256 reports whether h is "sha256:" and 64 lowercase hex digits
// (not a regular expression: this package is linked into the sandbox's
// init, whose start-up pays for every package initialised).
func isSHA256(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range []byte(hex) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Validate checks a list of changes read from outside (a bundle): clean
// relative paths inside the workspace, known operations and kinds, hashes
// where content is, no path twice. It names the first bad entry.
func Validate(changes []Change) error {
	seen := make(map[string]bool, len(changes))
	entryOK := func(e Entry) error {
		switch e.Kind {
		case KindDir:
		case KindFile, KindSymlink:
			if !isSHA256(e.Hash) {
				return fmt.Errorf("hash %q is not sha256:<64 hex digits>", e.Hash)
			}
			if e.Size < 0 {
				return errors.New("negative size")
			}
		default:
			return fmt.Errorf("unknown kind %q", e.Kind)
		}
		if e.Mode&^ModeBits != 0 {
			return fmt.Errorf("mode %v has more than permission bits", e.Mode)
		}
		if e.Kind == KindSymlink && (e.LinkTarget == "" || strings.IndexByte(e.LinkTarget, 0) >= 0 || sha256Of(e.LinkTarget) != e.Hash) {
			return errors.New("symlink target does not match its hash")
		}
		return nil
	}
	for i, c := range changes {
		bad := func(why string) error { return fmt.Errorf("change %d (%q) is invalid: %s", i+1, c.Path, why) }
		p := c.Path
		if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") ||
			strings.IndexByte(p, 0) >= 0 {
			return bad("the path is not a clean relative path")
		}
		if seen[p] {
			return bad("the path is listed twice")
		}
		seen[p] = true
		if c.RenamedFrom != "" && !cleanRel(c.RenamedFrom) {
			return bad("renamed_from is not a clean relative path")
		}
		switch c.Op {
		case OpCreated, OpDeleted:
			if c.Pre != nil {
				return bad("only a modification has a pre-run entry")
			}
		case OpModified:
			if c.Pre == nil {
				return bad("a modification needs its pre-run entry")
			}
			if err := entryOK(*c.Pre); err != nil {
				return bad("pre-run entry: " + err.Error())
			}
		default:
			return bad(fmt.Sprintf("unknown operation %q", c.Op))
		}
		if err := entryOK(c.Entry()); err != nil {
			return bad(err.Error())
		}
	}
	return validateTree(changes)
}

// validateTree checks that each state the list describes is a tree: no
// entry of the pre-run (or post-run) state lies below a path that is a
// file or a symlink in that same state. A list that asks for one would
// have Revert or Apply write through the symlink it just made.
func validateTree(changes []Change) error {
	byPath := make(map[string]*Change, len(changes))
	for i := range changes {
		byPath[changes[i].Path] = &changes[i]
	}
	for _, st := range []struct {
		name string
		at   func(Change) *Entry
	}{{"pre-run", Change.Before}, {"post-run", Change.After}} {
		for _, c := range changes {
			if st.at(c) == nil {
				continue
			}
			for d := path.Dir(c.Path); d != "."; d = path.Dir(d) {
				p, ok := byPath[d]
				if !ok {
					continue
				}
				if e := st.at(*p); e != nil && e.Kind != KindDir {
					return fmt.Errorf("change %q is invalid: in the %s state it lies below %s, which is a %s then", c.Path, st.name, d, e.Kind)
				}
			}
		}
	}
	return nil
}

// sha256Of is "sha256:<hex>" of s, as the bundle's digests are written.
func sha256Of(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// cleanRel reports whether rel is a clean relative slash path that stays
// inside its root ("" and "." are the root itself), as safefs.CheckPath.
func cleanRel(rel string) bool {
	if rel == "" || rel == "." {
		return true
	}
	return rel[0] != '/' && strings.IndexByte(rel, 0) < 0 && path.Clean(rel) == rel && rel != ".." && !strings.HasPrefix(rel, "../")
}
