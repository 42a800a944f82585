package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/format/fsdiff"
	"github.com/dal-runtime/dal/internal/safefs"
)

// The workspace-change format is package fsdiff's; these names are its.
type (
	Entry      = fsdiff.Entry
	Change     = fsdiff.Change
	Uncaptured = fsdiff.Uncaptured
)

const (
	OpCreated          = fsdiff.OpCreated
	OpModified         = fsdiff.OpModified
	OpDeleted          = fsdiff.OpDeleted
	KindFile           = fsdiff.KindFile
	KindDir            = fsdiff.KindDir
	KindSymlink        = fsdiff.KindSymlink
	StrippedSetuid     = fsdiff.StrippedSetuid
	StrippedSetgid     = fsdiff.StrippedSetgid
	StrippedCapability = fsdiff.StrippedCapability
	modeBits           = fsdiff.ModeBits
)

// MirrorPath is fsdiff.MirrorPath.
func MirrorPath(rel string) string { return fsdiff.MirrorPath(rel) }

// Validate is fsdiff.Validate.
func Validate(changes []Change) error { return fsdiff.Validate(changes) }

// applied is the entry Apply leaves at c.Path (nil: none): c.After()
// without setuid and setgid on a file, whatever the list says.
func applied(c Change) *Entry {
	e := c.After()
	if e != nil && e.Kind == KindFile {
		e.Mode &^= fs.ModeSetuid | fs.ModeSetgid
	}
	return e
}

func unixMode(m fs.FileMode) uint32 { return fsdiff.UnixMode(m) }

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
