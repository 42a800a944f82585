package checkpoint

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
)

// Environment variables that choose the store.
const (
	EnvStore    = "DAL_CHECKPOINTS"
	envXDGState = "XDG_STATE_HOME"
)

const (
	lockFile      = ".lock"
	partialInfix  = atomicfile.TempInfix
	archiveSuffix = ".tar.zst"
)

// Store is a checkpoint store directory. Its methods are safe for
// concurrent use, also from several processes.
type Store struct {
	// Dir is the store's directory; it is created by the first write.
	Dir string
	// Policy is applied after every Ingest. The zero Policy keeps
	// everything; Open sets DefaultPolicy().
	Policy Policy
	// Now is the real clock (nil: time.Now); tests inject one.
	Now func() time.Time
}

// DefaultDir is $DAL_CHECKPOINTS, else $XDG_STATE_HOME/dal/checkpoints,
// else ~/.local/state/dal/checkpoints.
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvStore); d != "" {
		return d, nil
	}
	if d := os.Getenv(envXDGState); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "dal", "checkpoints"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("checkpoint store: no home directory (%v): set %s", err, EnvStore)
	}
	return filepath.Join(home, ".local", "state", "dal", "checkpoints"), nil
}

// Open returns the store at dir ("" = DefaultDir()) with DefaultPolicy(). A
// missing directory is an empty store; a path that is not a directory is an
// error.
func Open(dir string) (*Store, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint store %s is not a directory: choose another with --store or %s", abs, EnvStore)
	}
	return &Store{Dir: abs, Policy: DefaultPolicy()}, nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) runDir(id string) string { return filepath.Join(s.Dir, id) }

// lock takes the store's lock, exclusively for writers (creating the store)
// or shared for readers (none when the store has never been written).
func (s *Store) lock(exclusive bool) (unlock func(), err error) {
	path := filepath.Join(s.Dir, lockFile)
	var f *os.File
	how := syscall.LOCK_SH
	if exclusive {
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return nil, writeErr("checkpoint store "+s.Dir, err)
		}
		f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, writeErr("checkpoint store "+s.Dir, err)
		}
		how = syscall.LOCK_EX
	} else {
		f, err = os.Open(path)
		if err != nil {
			// A store nobody wrote, or one we may only read: readers
			// still see complete files, since every write is a rename.
			return func() {}, nil
		}
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint store %s: lock: %w", s.Dir, err)
	}
	return func() { f.Close() }, nil // closing releases the flock
}

// runIDs lists the run directories, sorted. A missing store has none.
func (s *Store) runIDs() ([]string, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", s.Dir, err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && validRunID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// loaded is a run's manifest, or why it could not be read.
type loaded struct {
	id  string
	m   *Manifest
	err error
}

// loadAll reads every run's manifest. Runs without one (a first Ingest
// that did not finish) are reported as a ManifestError too.
func (s *Store) loadAll() ([]loaded, error) {
	ids, err := s.runIDs()
	if err != nil {
		return nil, err
	}
	out := make([]loaded, 0, len(ids))
	for _, id := range ids {
		m, err := readManifest(s.runDir(id), id)
		if errors.Is(err, fs.ErrNotExist) {
			if !hasArchives(s.runDir(id)) {
				continue // not ours, or emptied
			}
			err = &ManifestError{Run: id, Reason: "it is missing"}
		}
		out = append(out, loaded{id: id, m: m, err: err})
	}
	return out, nil
}

func hasArchives(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), archiveSuffix) && !strings.HasPrefix(e.Name(), ".") {
			return true
		}
	}
	return false
}

// The patterns compile on first use: dal-exec starts for every agent run,
// most of which never touch the checkpoint store.
var (
	runIDPattern   = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	archivePattern = lazyRegexp(`^[0-9]{4,}-[a-z0-9._-]{1,48}\.tar\.zst$`)
	nameUnsafe     = lazyRegexp(`[^a-z0-9._-]+`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

func validRunID(id string) bool { return runIDPattern().MatchString(id) }

func validArchiveName(n string) bool {
	return archivePattern().MatchString(n) && !strings.Contains(n, "..")
}

// archiveName is "<seq>-<name>.tar.zst" with name reduced to safe
// characters.
func archiveName(seq int, name string) string {
	n := strings.Trim(nameUnsafe().ReplaceAllString(strings.ToLower(name), "-"), "-.")
	n = strings.ReplaceAll(n, "..", ".")
	if len(n) > 40 {
		n = strings.TrimRight(n[:40], "-.")
	}
	if n == "" {
		n = "checkpoint"
	}
	return fmt.Sprintf("%04d-%s%s", seq, n, archiveSuffix)
}

// NewRunID makes a run id from the real time and 4 random bytes, e.g.
// 20260102-150405-1a2b3c4d: ids sort by start time.
func NewRunID(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// ManualRunID is the run that `dal-exec checkpoint save` outside an agent
// run adds to, one per workspace.
func ManualRunID(workspace string) string {
	h := sha256.Sum256([]byte(workspace))
	return "manual-" + hex.EncodeToString(h[:5])
}
