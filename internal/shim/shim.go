// Package shim carries the Python and Node runtime shims inside the dal-exec
// binary and installs them where an agent's interpreter will load them.
//
// Installation extracts the embedded files once into a content-addressed
// directory under the user's cache (or a private temporary directory when
// there is no usable cache); later runs reuse it. Nothing is installed into
// the agent's environment or site-packages: the runner points PYTHONPATH and
// NODE_OPTIONS at the directory.
package shim

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed all:python all:node
var files embed.FS

// Dir is an installed shim tree.
type Dir string

// PythonPath is the directory to put first on PYTHONPATH.
func (d Dir) PythonPath() string { return filepath.Join(string(d), "python") }

// NodeRequire is the script to pass to node with --require.
func (d Dir) NodeRequire() string { return filepath.Join(string(d), "node", "dal-register.js") }

// shipped reports whether an embedded path belongs in the installed tree:
// tests and caches stay out.
func shipped(p string) bool {
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "__pycache__", "tests", "test", "node_modules":
			return false
		}
	}
	return !strings.HasSuffix(p, ".pyc")
}

var (
	digestOnce sync.Once
	digest     string
)

// Digest identifies the embedded shim files.
func Digest() string {
	digestOnce.Do(func() {
		h := sha256.New()
		fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !shipped(p) {
				return err
			}
			b, _ := files.ReadFile(p)
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
			h.Write(b)
			return nil
		})
		digest = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return digest
}

// Install makes sure the shims are extracted and returns their directory.
// It is safe to call concurrently, also from several processes.
func Install() (Dir, error) {
	var errs []error
	for _, base := range bases() {
		d, err := installIn(base)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("install runtime shims: %w", errors.Join(errs...))
}

func bases() []string {
	var out []string
	if c, err := os.UserCacheDir(); err == nil {
		out = append(out, filepath.Join(c, "dal", "shims"))
	}
	return append(out, filepath.Join(os.TempDir(), fmt.Sprintf("dal-shims-%d", os.Getuid())))
}

func installIn(base string) (Dir, error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	if err := checkOwned(base); err != nil {
		return "", err
	}
	final := filepath.Join(base, Digest())
	if _, err := os.Stat(filepath.Join(final, ".complete")); err == nil {
		return Dir(final), nil
	}
	tmp, err := os.MkdirTemp(base, ".extract-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if !shipped(p) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		dst := filepath.Join(tmp, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err == nil {
		precompile(tmp)
		err = os.WriteFile(filepath.Join(tmp, ".complete"), []byte(Digest()+"\n"), 0o644)
	}
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another process won the race; its tree is identical.
		if _, serr := os.Stat(filepath.Join(final, ".complete")); serr == nil {
			return Dir(final), nil
		}
		return "", err
	}
	return Dir(final), nil
}

// precompile compiles the Python shim with the default python3, when there
// is one, so that agents do not each pay for compiling it -- notably inside
// a sandbox, where the shim directory is read-only. Best effort: without
// it Python compiles in memory.
func precompile(dir string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return
	}
	cmd := exec.Command(py, "-m", "compileall", "-q", filepath.Join(dir, "python"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Run()
}

// checkOwned refuses a shared directory someone else controls: the shims
// are code every agent runs.
func checkOwned(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if uid, ok := ownerUID(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you", dir, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others", dir)
	}
	return nil
}
