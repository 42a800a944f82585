package safefs

import (
	"io"
	"io/fs"
	"path"
	"strings"
)

// Copy copies the directory srel of src to the new directory drel of dst,
// never following a symlink on either side: directories, regular files
// with their permission bits, and symlinks as symlinks; fifos, sockets and
// devices are not copied. Entries below srel for which skip (when set) is
// true are left out, with their content.
func Copy(src *Dir, srel string, dst *Dir, drel string, skip func(rel string) bool) error {
	return src.Walk(srel, func(rel string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if skip != nil && rel != srel && skip(rel) {
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := drel
		if rel != srel {
			target = path.Join(drel, strings.TrimPrefix(rel, srel+"/"))
		}
		switch {
		case fi.IsDir():
			return dst.Mkdir(target, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := src.Readlink(rel)
			if err != nil {
				return err
			}
			return dst.Symlink(link, target)
		case fi.Mode().IsRegular():
			in, err := src.Open(rel)
			if err != nil {
				return err
			}
			defer in.Close()
			o, err := dst.Create(target, fi.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(o, in); err != nil {
				o.Close()
				return err
			}
			return o.Close()
		}
		return nil
	})
}
