package record

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/version"
)

// networkWrite writes network.har and prompts/ into the bundle's staging
// directory on a goroutine of its own, started once the agent has exited,
// while the steps that do not read them run (selectIterations, capture:
// 5–120 ms on a 2-CPU machine, mostly waiting for the sandbox to go, with
// ~3 ms of CPU). writeRecords waits for it before it scrubs the bundle;
// cleanup waits for it before the staging directory goes.
//
// Written after capture, as it was, it took 0.25–0.5 ms per LLM call on
// that machine (most of it encoding entries and creating one prompt file
// per call); beside a slow capture it costs nothing, beside a quick one
// about as much as before. Written while the agent ran, as each exchange
// finished, it competed with the agent and the proxy for the CPU and made
// a loaded machine's record slower, not faster (docs/benchmarks.md).
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

// writeNetwork stores network.har and prompts/ in dir, the bundle's
// staging directory, and sets n.count and n.prompts. The prompt files are
// written on a second goroutine as the entries are encoded. Neither
// prompts/ nor a file in it is followed if it is a symlink, and no file
// may exist. (Syncing each file there, on 8 goroutines, made the commit's
// own sync of it three times cheaper but cost more than that here when
// capture is quick.)
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
	written := make(chan error, 1)
	go func() {
		var err error
		for f := range files {
			if err == nil {
				err = writePrompt(root, f.n, f.p)
			}
		}
		written <- err
	}()
	entries, ps, err := encodeNetwork(n, xs, func(i int, p *prompts.Prompt) { files <- promptFile{i, p} })
	close(files)
	if werr := <-written; err == nil && werr != nil {
		err = fmt.Errorf("write prompts/: %w", werr)
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
// bundle's staging directory; the first creates prompts/.
func writePrompt(root *safefs.Dir, n int, p *prompts.Prompt) error {
	b, err := prompts.Marshal(p)
	if err != nil {
		return err
	}
	if n == 1 {
		if err := root.Mkdir(prompts.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	f, err := root.Create(prompts.Dir+"/"+prompts.FileName(n), 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
