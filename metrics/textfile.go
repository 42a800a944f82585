package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prometheus/common/expfmt"
)

// pathError is a textfile problem told as one sentence with its fix; the
// underlying error stays reachable through errors.Is and errors.As.
type pathError struct {
	msg string
	err error
}

func (e *pathError) Error() string { return e.msg }
func (e *pathError) Unwrap() error { return e.err }

// CheckTextfilePath reports whether WriteTextfile could write path: the name
// ends in .prom (node_exporter's textfile collector reads nothing else) and
// its directory exists and accepts a new file, which it tries; path itself
// need not exist yet. dal-exec calls
// it when it parses --metrics-textfile, before the run, so that a bad path
// does not surface only after the agent has finished.
func CheckTextfilePath(path string) error {
	if err := checkTarget(path); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return explainTextfileErr(path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// WriteTextfile writes the dal_* families, without the Go and process
// collectors, to path in the Prometheus text format that node_exporter's
// textfile collector reads. The write is atomic: a temporary file in the same
// directory (not ending in .prom, so the collector never reads it half
// written) is synced and renamed over path, mode 0644 so that a
// node_exporter running as another user can read it.
func (m *Metrics) WriteTextfile(path string) error {
	if err := checkTarget(path); err != nil {
		return err
	}
	families, err := m.dal.Gather()
	if err != nil {
		return fmt.Errorf("gather metrics: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return explainTextfileErr(path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	enc := expfmt.NewEncoder(f, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err = enc.Encode(mf); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write metrics textfile %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return explainTextfileErr(path, err)
	}
	return nil
}

// checkTarget refuses what no write could fix: a name the collector ignores
// and a directory where the file should go.
func checkTarget(path string) error {
	if !strings.HasSuffix(path, ".prom") || filepath.Base(path) == ".prom" {
		return &pathError{msg: fmt.Sprintf("the metrics textfile %s must be named NAME.prom: node_exporter's textfile collector reads only *.prom files", path)}
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return &pathError{fmt.Sprintf("the metrics textfile %s is a directory: name a file inside it, e.g. %s", path, filepath.Join(path, "dal.prom")), syscall.EISDIR}
	}
	return nil
}

// tempPattern names the temporary file after its target so that a leftover
// from a crash says where it came from.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".tmp-*" }

func explainTextfileErr(path string, err error) error {
	dir := filepath.Dir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &pathError{fmt.Sprintf("the metrics textfile directory %s does not exist: create it or pass another --metrics-textfile", dir), err}
	case errors.Is(err, syscall.ENOTDIR):
		return &pathError{fmt.Sprintf("the metrics textfile directory %s is not a directory: pass another --metrics-textfile", dir), err}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return &pathError{fmt.Sprintf("the metrics textfile directory %s is not writable: fix its permissions or pass another --metrics-textfile", dir), err}
	}
	return fmt.Errorf("write metrics textfile %s: %w", path, err)
}
