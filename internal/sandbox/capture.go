package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/safefs"
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

// applied is the entry Apply leaves at c.Path (nil: none): after() without
// setuid and setgid on a file, whatever the list says.
func (c Change) applied() *Entry {
	e := c.after()
	if e != nil && e.Kind == KindFile {
		e.Mode &^= fs.ModeSetuid | fs.ModeSetgid
	}
	return e
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
	return jsonEntry{Kind: e.Kind, Mode: fmt.Sprintf("%04o", unixMode(e.Mode)), Hash: e.Hash, Size: e.Size, LinkTarget: lt, LinkTargetB64: lt64}
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
	return Entry{Kind: j.Kind, Mode: goMode(uint32(m)), Hash: j.Hash, Size: j.Size, LinkTarget: lt}, nil
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

// unixMode and goMode convert between fs.FileMode bits and chmod(2) bits.
func unixMode(m fs.FileMode) uint32 { return safefs.UnixMode(m) }

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

// specialKind names what is not captured, for [Uncaptured].
func specialKind(fi fs.FileInfo) string {
	m := fi.Mode()
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "char device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}

// entryOf describes the entry rel of d (lstat'ed as fi), hashing its
// content.
func entryOf(d *safefs.Dir, rel string, fi fs.FileInfo) (Entry, error) {
	e, _, err := entryCaps(d, rel, fi, false)
	return e, err
}

// entryCaps is entryOf that also reports, with caps, whether a file has
// file capabilities (the security.capability xattr).
func entryCaps(d *safefs.Dir, rel string, fi fs.FileInfo, caps bool) (Entry, bool, error) {
	e := Entry{Kind: kindOf(fi), Mode: fi.Mode() & modeBits}
	has := false
	switch e.Kind {
	case KindFile:
		f, err := d.Open(rel)
		if err != nil {
			return e, false, err
		}
		defer f.Close()
		if e.Hash, e.Size, err = digest.Reader(f); err != nil {
			return e, false, err
		}
		if caps {
			_, err := unix.Fgetxattr(int(f.Fd()), "security.capability", nil)
			has = err == nil
		}
	case KindSymlink:
		t, err := d.Readlink(rel)
		if err != nil {
			return e, false, err
		}
		e.LinkTarget, e.Hash, e.Size = t, digest.Bytes([]byte(t)), int64(len(t))
	}
	return e, has, nil
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
	st := safefs.Stat(fi)
	return st != nil && st.Rdev == 0
}

// isOpaque reports whether the directory rel of layer d hides the layers
// below it.
func isOpaque(d *safefs.Dir, rel string) bool {
	v, err := d.Getxattr(rel, opaqueXattr())
	return err == nil && len(v) == 1 && v[0] == 'y'
}

// view is a stack of overlay layers, top first, read as overlayfs merges
// them: whiteouts hide, opaque directories cut, a non-directory hides what
// is below it. One layer is a plain directory. Every layer is read through
// a safefs.Dir: a symlink is an entry, never a way.
type view []*safefs.Dir

// openView opens the layers at paths (top first).
func openView(paths []string) (view, error) {
	v := make(view, 0, len(paths))
	for _, p := range paths {
		d, err := safefs.Open(p)
		if err != nil {
			v.close()
			return nil, err
		}
		v = append(v, d)
	}
	return v, nil
}

func (v view) close() {
	for _, d := range v {
		d.Close()
	}
}

// lookup is Lstat of rel in one layer; fi is nil when rel is absent there
// (also when a parent is not a directory: a file, or a symlink, which a
// layer's tree does not pass through).
func lookup(d *safefs.Dir, rel string) (fs.FileInfo, error) {
	fi, err := d.Lstat(rel)
	if err != nil {
		if isAbsent(err) || errors.Is(err, safefs.ErrSymlink) {
			return nil, nil
		}
		return nil, err
	}
	return fi, nil
}

// find returns the layer where rel (clean, slash-separated, "" for the
// root) is in the merged view and its lstat; fi is nil when absent.
func (v view) find(rel string) (*safefs.Dir, fs.FileInfo, error) {
	if len(v) == 1 || rel == "" {
		fi, err := lookup(v[0], rel)
		if err != nil || fi == nil || isWhiteout(fi) {
			return nil, nil, err
		}
		return v[0], fi, nil
	}
	active := []*safefs.Dir(v)
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
		var next []*safefs.Dir
		for _, layer := range active {
			fi, err := lookup(layer, name)
			if err != nil {
				return nil, nil, err
			}
			if fi == nil {
				continue
			}
			if isWhiteout(fi) {
				break
			}
			if !fi.IsDir() {
				if len(next) == 0 && last {
					return layer, fi, nil
				}
				break
			}
			next = append(next, layer)
			if isOpaque(layer, name) {
				break
			}
		}
		if len(next) == 0 {
			return nil, nil, nil
		}
		if last {
			fi, err := next[0].Lstat(rel)
			return next[0], fi, err
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
func (v view) dirLayers(rel string) ([]*safefs.Dir, error) {
	if len(v) == 1 {
		return v, nil
	}
	active := []*safefs.Dir(v)
	if rel == "" {
		var out []*safefs.Dir
		for _, l := range active {
			out = append(out, l)
			if isOpaque(l, "") {
				break
			}
		}
		return out, nil
	}
	comps := splitRel(rel)
	for i := range comps {
		name := path.Join(comps[:i+1]...)
		var next []*safefs.Dir
		for _, layer := range active {
			fi, err := lookup(layer, name)
			if err != nil {
				return nil, err
			}
			if fi == nil {
				continue
			}
			if isWhiteout(fi) || !fi.IsDir() {
				break
			}
			next = append(next, layer)
			if isOpaque(layer, name) {
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

// list returns the sorted entries of directory rel of the merged view
// (whiteouts removed; special files included), each with the layer it
// comes from when that is certain: with one layer, the entry's lstat is
// taken from the listing itself.
func (v view) list(rel string) ([]listed, error) {
	layers, err := v.dirLayers(rel)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []listed
	for _, l := range layers {
		ents, err := l.ReadDir(rel)
		if err != nil {
			if isAbsent(err) || errors.Is(err, safefs.ErrSymlink) {
				continue
			}
			return nil, err
		}
		for _, e := range ents {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			fi, _ := e.Info()
			if isWhiteout(fi) {
				continue
			}
			it := listed{name: e.Name()}
			if len(v) == 1 {
				it.layer, it.fi = l, fi
			}
			out = append(out, it)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// listed is one entry of view.list; layer and fi are set only when the
// view has one layer.
type listed struct {
	name  string
	layer *safefs.Dir
	fi    fs.FileInfo
}

// entry returns where the entry rel, listed as it, is and its lstat.
func (v view) entry(rel string, it listed) (*safefs.Dir, fs.FileInfo, error) {
	if it.layer != nil {
		return it.layer, it.fi, nil
	}
	return v.find(rel)
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
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

// Capture reads what the run changed: the upper layer of cfg compared with
// its lower view. The result is sorted by path (parents before children).
// Preconditions: the sandbox has exited (the overlay is gone with its
// namespace) and the lower layers are as they were during the run.
func Capture(cfg Config) ([]Change, error) {
	cs, _, err := CaptureAll(cfg)
	return cs, err
}

// CaptureAll is [Capture] that also returns the fifos, sockets and device
// nodes the run left, which are not captured (sorted by path).
func CaptureAll(cfg Config) ([]Change, []Uncaptured, error) {
	upper, err := safefs.OpenOneMount(Upper(cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("capture the workspace changes: %w", err)
	}
	defer upper.Close()
	lower, err := openView(cfg.lowers())
	if err != nil {
		return nil, nil, fmt.Errorf("capture the workspace changes: %w", err)
	}
	defer lower.close()
	out, skipped, err := capture(upper, lower)
	if err != nil {
		return nil, nil, fmt.Errorf("capture the workspace changes: %w", err)
	}
	return out, skipped, nil
}

func capture(upper *safefs.Dir, lower view) ([]Change, []Uncaptured, error) {
	var out []Change
	var skipped []Uncaptured
	// deleted lists rel and, for a directory, everything below it.
	var deleted func(rel string) error
	deleted = func(rel string) error {
		d, fi, err := lower.find(rel)
		if err != nil || fi == nil || kindOf(fi) == "" {
			return err
		}
		e, err := entryOf(d, rel, fi)
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
		ents, err := upper.ReadDir(rel)
		if err != nil {
			return err
		}
		present := map[string]bool{}
		for _, de := range ents {
			r := path.Join(rel, de.Name())
			fi, err := de.Info()
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
				skipped = append(skipped, Uncaptured{Path: r, Kind: specialKind(fi)})
				continue
			}
			now, caps, err := entryCaps(upper, r, fi, true)
			if err != nil {
				return err
			}
			ld, lfi, err := lower.find(r)
			if err != nil {
				return err
			}
			if lfi == nil || kindOf(lfi) == "" {
				out = append(out, strip(change(r, OpCreated, now, nil), caps))
				if now.Kind == KindDir {
					if err := walk(r, false); err != nil {
						return err
					}
				}
				continue
			}
			was, err := entryOf(ld, r, lfi)
			if err != nil {
				return err
			}
			if !sameEntry(now, was) || caps {
				out = append(out, strip(change(r, OpModified, now, &was), caps))
			}
			switch {
			case now.Kind == KindDir && was.Kind == KindDir:
				if err := walk(r, cut || isOpaque(upper, r)); err != nil {
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
	if err := walk("", isOpaque(upper, "")); err != nil {
		return nil, nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	labelRenames(out)
	return out, skipped, nil
}

// strip takes setuid and setgid off a file the run created or modified,
// and notes them and its file capabilities (caps) in Stripped. A
// directory's setgid (group inheritance) is kept.
func strip(c Change, caps bool) Change {
	if c.Kind != KindFile {
		return c
	}
	if c.Mode&fs.ModeSetuid != 0 {
		c.Stripped = append(c.Stripped, StrippedSetuid)
	}
	if c.Mode&fs.ModeSetgid != 0 {
		c.Stripped = append(c.Stripped, StrippedSetgid)
	}
	if caps {
		c.Stripped = append(c.Stripped, StrippedCapability)
	}
	c.Mode &^= fs.ModeSetuid | fs.ModeSetgid
	return c
}

// deletedBelow calls deleted for every entry of lower directory rel not in
// keep.
func deletedBelow(lower view, rel string, keep map[string]bool, deleted func(string) error) error {
	ents, err := lower.list(rel)
	if err != nil {
		return err
	}
	for _, it := range ents {
		if !keep[it.name] {
			if err := deleted(path.Join(rel, it.name)); err != nil {
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
