package record

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/version"
)

// networkWrite writes network.har and prompts/ into the bundle's staging
// directory on a goroutine of its own, started once the agent has exited,
// while the steps that do not read them run (selectIterations, capture:
// mostly waiting for the sandbox to go, 60–120 ms with ~3 ms of CPU on a
// 2-CPU machine). writeRecords waits for it before it scrubs the bundle;
// cleanup waits for it before the staging directory goes.
//
// Written after capture, as it was, it took 0.25–0.35 ms per LLM call on
// that machine (100 calls: 25–35 ms, most of it creating one prompt file
// per call). Written while the agent ran, as each exchange finished, it
// competed with the agent and the proxy for the CPU and made a loaded
// machine's record slower, not faster (docs/benchmarks.md).
type networkWrite struct {
	done chan struct{}
	err  error
}

// startNetworkWrite writes xs, the run's exchanges in Seq order, as the
// bundle's network.har and prompts/ in dir (see writeNetwork).
func startNetworkWrite(dir string, n *Network, xs []*har.Exchange) *networkWrite {
	w := &networkWrite{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = writeNetwork(dir, n, xs)
	}()
	return w
}

// wait returns writeNetwork's error once it has returned.
func (w *networkWrite) wait() error {
	<-w.done
	return w.err
}

// promptWriters write and sync prompt files at once: creations take turns
// on the directory, syncs wait on the disk together.
const promptWriters = 8

// writeNetwork stores network.har and prompts/ in dir, the bundle's
// staging directory, and sets n.count and n.prompts. The prompt files are
// written and synced by promptWriters goroutines as the entries are
// encoded: the bundle's commit syncs every file again, and a file already
// on disk costs it about a third of one written just before. Neither
// prompts/ nor a file in it is followed if it is a symlink, and no file
// may exist.
func writeNetwork(dir string, n *Network, xs []*har.Exchange) error {
	root, err := safefs.OpenOneMount(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	type promptFile struct {
		n int
		p *prompts.Prompt
	}
	files := make(chan promptFile, 16)
	var (
		mkdir   sync.Once
		dirErr  error
		wg      sync.WaitGroup
		mu      sync.Mutex
		fileErr error
	)
	for range promptWriters {
		wg.Go(func() {
			for f := range files {
				mkdir.Do(func() {
					if err := root.Mkdir(prompts.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
						dirErr = err
					}
				})
				err := dirErr
				if err == nil {
					err = writePrompt(root, f.n, f.p)
				}
				if err != nil {
					mu.Lock()
					fileErr = cmp.Or(fileErr, err)
					mu.Unlock()
				}
			}
		})
	}
	entries, ps, err := encodeNetwork(n, xs, func(i int, p *prompts.Prompt) { files <- promptFile{i, p} })
	close(files)
	wg.Wait()
	if err == nil && fileErr != nil {
		err = fmt.Errorf("write prompts/: %w", fileErr)
	}
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "network.har"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if err := har.WriteEncoded(f, har.NewLog(nil, version.Version), entries); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	n.count = len(entries)
	n.prompts = ps
	return nil
}

// encodeNetwork turns xs into encoded HAR entries and extracts the LLM
// calls' prompts, calling prompt with each (numbered from 1) as it comes.
func encodeNetwork(n *Network, xs []*har.Exchange, prompt func(int, *prompts.Prompt)) ([]har.EncodedEntry, []*prompts.Prompt, error) {
	entries := make([]har.EncodedEntry, 0, len(xs))
	var ps []*prompts.Prompt
	for _, x := range xs {
		e, err := har.FromExchange(x, n.redactor)
		if err != nil {
			return nil, nil, fmt.Errorf("network exchange %d (%s %s): %w", x.Seq, x.Request.Method, x.Request.URL, err)
		}
		enc, err := har.EncodeEntry(&e)
		if err != nil {
			return nil, nil, fmt.Errorf("write network.har: %w", err)
		}
		entries = append(entries, enc)
		if p, ok := prompts.Extract(&e); ok {
			ps = append(ps, p)
			prompt(len(ps), p)
		}
	}
	return entries, ps, nil
}

// writePrompt writes p as prompts/NNNN.json (n from 1) under root, the
// bundle's staging directory, and syncs it.
func writePrompt(root *safefs.Dir, n int, p *prompts.Prompt) error {
	b, err := prompts.Marshal(p)
	if err != nil {
		return err
	}
	f, err := root.Create(prompts.Dir+"/"+prompts.FileName(n), 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
