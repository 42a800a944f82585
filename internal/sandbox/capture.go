package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Operations of a [Change].
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpDeleted  = "deleted"
)

// Kinds of entries. Fifos, sockets and devices are not captured.
const (
	KindFile    = "file"
	KindDir     = "dir"
	KindSymlink = "symlink"
)

// modeBits are the mode bits compared, stored and restored.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

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
}

// Entry returns the fields of c that describe its entry.
func (c Change) Entry() Entry {
	return Entry{Kind: c.Kind, Mode: c.Mode, Hash: c.Hash, Size: c.Size, LinkTarget: c.LinkTarget}
}

// before is the entry at c.Path before the run (nil: none).
func (c Change) before() *Entry {
	switch c.Op {
	case OpModified:
		return c.Pre
	case OpDeleted:
		e := c.Entry()
		return &e
	}
	return nil
}

// after is the entry at c.Path after the run (nil: none).
func (c Change) after() *Entry {
	if c.Op == OpDeleted {
		return nil
	}
	e := c.Entry()
	return &e
}

// jsonEntry is the on-disk form: modes as octal strings ("0755", "4755").
type jsonEntry struct {
	Kind       string `json:"kind"`
	Mode       string `json:"mode"`
	Hash       string `json:"hash,omitempty"`
	Size       int64  `json:"size"`
	LinkTarget string `json:"link_target,omitempty"`
}

type jsonChange struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	jsonEntry
	Pre         *jsonEntry `json:"pre,omitempty"`
	RenamedFrom string     `json:"renamed_from,omitempty"`
}

func toJSONEntry(e Entry) jsonEntry {
	return jsonEntry{Kind: e.Kind, Mode: fmt.Sprintf("%04o", unixMode(e.Mode)), Hash: e.Hash, Size: e.Size, LinkTarget: e.LinkTarget}
}

func fromJSONEntry(j jsonEntry) (Entry, error) {
	m, err := strconv.ParseUint(j.Mode, 8, 32)
	if err != nil || m > 0o7777 {
		return Entry{}, fmt.Errorf("mode %q is not an octal permission", j.Mode)
	}
	return Entry{Kind: j.Kind, Mode: goMode(uint32(m)), Hash: j.Hash, Size: j.Size, LinkTarget: j.LinkTarget}, nil
}

// MarshalJSON writes modes as octal strings.
func (c Change) MarshalJSON() ([]byte, error) {
	j := jsonChange{Path: c.Path, Op: c.Op, jsonEntry: toJSONEntry(c.Entry()), RenamedFrom: c.RenamedFrom}
	if c.Pre != nil {
		p := toJSONEntry(*c.Pre)
		j.Pre = &p
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
	*c = Change{Path: j.Path, Op: j.Op, Kind: e.Kind, Mode: e.Mode, Hash: e.Hash, Size: e.Size, LinkTarget: e.LinkTarget, RenamedFrom: j.RenamedFrom}
	if j.Pre != nil {
		p, err := fromJSONEntry(*j.Pre)
		if err != nil {
			return err
		}
		c.Pre = &p
	}
	return nil
}

// unixMode and goMode convert between fs.FileMode bits and chmod(2) bits.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}

func goMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if u&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if u&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// kindOf names fi's kind, "" for what is not captured.
func kindOf(fi fs.FileInfo) string {
	switch {
	case fi.Mode().IsRegular():
		return KindFile
	case fi.IsDir():
		return KindDir
	case fi.Mode()&fs.ModeSymlink != 0:
		return KindSymlink
	}
	return ""
}

// entryOf describes the entry at p (lstat'ed as fi), hashing its content.
func entryOf(p string, fi fs.FileInfo) (Entry, error) {
	e := Entry{Kind: kindOf(fi), Mode: fi.Mode() & modeBits}
	switch e.Kind {
	case KindFile:
		h, err := hashFile(p)
		if err != nil {
			return e, err
		}
		e.Hash, e.Size = h, fi.Size()
	case KindSymlink:
		t, err := os.Readlink(p)
		if err != nil {
			return e, err
		}
		e.LinkTarget, e.Hash, e.Size = t, hashBytes([]byte(t)), int64(len(t))
	}
	return e, nil
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// sameEntry reports whether two entries are the same content: kind, mode
// bits, and content or target.
func sameEntry(a, b Entry) bool {
	return a.Kind == b.Kind && a.Mode == b.Mode && a.Hash == b.Hash
}

// isWhiteout reports whether fi is an overlay whiteout (char device 0:0).
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque reports whether the directory p hides the layers below it.
func isOpaque(p string) bool {
	buf := make([]byte, 4)
	for _, name := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		n, err := unix.Lgetxattr(p, name, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// view is a stack of overlay layers, top first, read as overlayfs merges
// them: whiteouts hide, opaque directories cut, a non-directory hides what
// is below it. One layer is a plain directory.
type view []string

// find returns where rel (clean, slash-separated, "" for the root) is in the
// merged view and its lstat; fi is nil when absent.
func (v view) find(rel string) (string, fs.FileInfo, error) {
	if len(v) == 1 || rel == "" {
		p := filepath.Join(v[0], filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		if err != nil {
			if isAbsent(err) {
				return "", nil, nil
			}
			return "", nil, err
		}
		if isWhiteout(fi) {
			return "", nil, nil
		}
		return p, fi, nil
	}
	active := []string(v)
	dir := ""
	for {
		var name string
		i := indexSlash(rel, len(dir))
		if i < 0 {
			name = rel
		} else {
			name = rel[:i]
		}
		last := i < 0
		var next []string
		for _, layer := range active {
			p := filepath.Join(layer, filepath.FromSlash(name))
			fi, err := os.Lstat(p)
			if err != nil {
				if isAbsent(err) {
					continue
				}
				return "", nil, err
			}
			if isWhiteout(fi) {
				break
			}
			if !fi.IsDir() {
				if len(next) == 0 && last {
					return p, fi, nil
				}
				break
			}
			next = append(next, layer)
			if isOpaque(p) {
				break
			}
		}
		if len(next) == 0 {
			return "", nil, nil
		}
		if last {
			p := filepath.Join(next[0], filepath.FromSlash(rel))
			fi, err := os.Lstat(p)
			return p, fi, err
		}
		active, dir = next, name+"/"
	}
}

// indexSlash is the index of the first '/' in s at or after from, or -1.
func indexSlash(s string, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// dirLayers returns the layers that contribute to directory rel.
func (v view) dirLayers(rel string) ([]string, error) {
	if len(v) == 1 {
		return v, nil
	}
	active := []string(v)
	if rel == "" {
		var out []string
		for _, l := range active {
			out = append(out, l)
			if isOpaque(l) {
				break
			}
		}
		return out, nil
	}
	comps := splitRel(rel)
	for i := range comps {
		name := path.Join(comps[:i+1]...)
		var next []string
		for _, layer := range active {
			p := filepath.Join(layer, filepath.FromSlash(name))
			fi, err := os.Lstat(p)
			if err != nil {
				if isAbsent(err) {
					continue
				}
				return nil, err
			}
			if isWhiteout(fi) || !fi.IsDir() {
				break
			}
			next = append(next, layer)
			if isOpaque(p) {
				break
			}
		}
		active = next
		if len(active) == 0 {
			break
		}
	}
	return active, nil
}

// list returns the sorted names in directory rel of the merged view
// (whiteouts removed; special files included).
func (v view) list(rel string) ([]string, error) {
	layers, err := v.dirLayers(rel)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, l := range layers {
		ents, err := os.ReadDir(filepath.Join(l, filepath.FromSlash(rel)))
		if err != nil {
			if isAbsent(err) {
				continue
			}
			return nil, err
		}
		for _, e := range ents {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			if e.Type()&fs.ModeCharDevice != 0 {
				if fi, err := e.Info(); err == nil && isWhiteout(fi) {
					continue
				}
			}
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func splitRel(rel string) []string {
	var out []string
	for rel != "" {
		i := indexSlash(rel, 0)
		if i < 0 {
			return append(out, rel)
		}
		out, rel = append(out, rel[:i]), rel[i+1:]
	}
	return out
}

func isAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Capture reads what the run changed: the upper layer of cfg compared with
// its lower view. The result is sorted by path (parents before children).
// Preconditions: the sandbox has exited (the overlay is gone with its
// namespace) and the lower layers are as they were during the run.
func Capture(cfg Config) ([]Change, error) {
	out, err := capture(Upper(cfg), view(cfg.lowers()))
	if err != nil {
		return nil, fmt.Errorf("capture the workspace changes: %w", err)
	}
	return out, nil
}

func capture(upper string, lower view) ([]Change, error) {
	var out []Change
	// deleted lists rel and, for a directory, everything below it.
	var deleted func(rel string) error
	deleted = func(rel string) error {
		p, fi, err := lower.find(rel)
		if err != nil || fi == nil || kindOf(fi) == "" {
			return err
		}
		e, err := entryOf(p, fi)
		if err != nil {
			return err
		}
		out = append(out, change(rel, OpDeleted, e, nil))
		if e.Kind == KindDir {
			return deletedBelow(lower, rel, nil, deleted)
		}
		return nil
	}
	var walk func(rel string, cut bool) error
	walk = func(rel string, cut bool) error {
		ents, err := os.ReadDir(filepath.Join(upper, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		present := map[string]bool{}
		for _, de := range ents {
			r := path.Join(rel, de.Name())
			p := filepath.Join(upper, filepath.FromSlash(r))
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			if isWhiteout(fi) {
				if !cut {
					if err := deleted(r); err != nil {
						return err
					}
				}
				continue
			}
			present[de.Name()] = true
			if kindOf(fi) == "" {
				continue
			}
			now, err := entryOf(p, fi)
			if err != nil {
				return err
			}
			lp, lfi, err := lower.find(r)
			if err != nil {
				return err
			}
			if lfi == nil || kindOf(lfi) == "" {
				out = append(out, change(r, OpCreated, now, nil))
				if now.Kind == KindDir {
					if err := walk(r, false); err != nil {
						return err
					}
				}
				continue
			}
			was, err := entryOf(lp, lfi)
			if err != nil {
				return err
			}
			if !sameEntry(now, was) {
				out = append(out, change(r, OpModified, now, &was))
			}
			switch {
			case now.Kind == KindDir && was.Kind == KindDir:
				if err := walk(r, cut || isOpaque(p)); err != nil {
					return err
				}
			case now.Kind == KindDir:
				if err := walk(r, false); err != nil {
					return err
				}
			case was.Kind == KindDir:
				if err := deletedBelow(lower, r, nil, deleted); err != nil {
					return err
				}
			}
		}
		if cut {
			return deletedBelow(lower, rel, present, deleted)
		}
		return nil
	}
	if err := walk("", isOpaque(upper)); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	labelRenames(out)
	return out, nil
}

// deletedBelow calls deleted for every entry of lower directory rel not in
// keep.
func deletedBelow(lower view, rel string, keep map[string]bool, deleted func(string) error) error {
	names, err := lower.list(rel)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !keep[n] {
			if err := deleted(path.Join(rel, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

func change(rel, op string, e Entry, pre *Entry) Change {
	return Change{Path: rel, Op: op, Kind: e.Kind, Mode: e.Mode, Hash: e.Hash, Size: e.Size, LinkTarget: e.LinkTarget, Pre: pre}
}

// labelRenames sets RenamedFrom on each created file whose content matches
// exactly one deleted file, and no other created file. Empty files are
// not matched.
func labelRenames(cs []Change) {
	created, deleted := map[string][]int{}, map[string][]int{}
	for i, c := range cs {
		if c.Kind != KindFile || c.Size == 0 {
			continue
		}
		switch c.Op {
		case OpCreated:
			created[c.Hash] = append(created[c.Hash], i)
		case OpDeleted:
			deleted[c.Hash] = append(deleted[c.Hash], i)
		}
	}
	for h, ci := range created {
		if di := deleted[h]; len(ci) == 1 && len(di) == 1 {
			cs[ci[0]].RenamedFrom = cs[di[0]].Path
		}
	}
}
