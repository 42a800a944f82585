package record

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/safefs"
)

// writeAhead does writeNetwork's work for each exchange while the agent
// runs: as the proxy hands an exchange over (in request order), a
// goroutine of its own turns it into its redacted, encoded HAR entry and,
// for an LLM call, writes its prompts/NNNN.json into the bundle's
// staging. Once the agent has exited, writeNetwork has only network.har
// to write out. On a 2-CPU machine this took ~0.25 ms per LLM call off
// the time after the agent's exit, most of it the creation of one file
// per call (docs/benchmarks.md).
//
// The files it writes are those writeNetwork wrote after the run: the
// same bytes, names and modes, created with O_EXCL and without following
// a symlink, in the staging directory only dal writes to.
type writeAhead struct {
	redactor *har.Redactor
	root     *safefs.Dir // the bundle's staging directory

	mu     sync.Mutex
	queue  []*har.Exchange
	closed bool
	wake   chan struct{} // one pending wake-up
	done   chan struct{} // closed when the goroutine has returned

	// Owned by the goroutine until done is closed.
	seqs    []int // the exchanges' Seq, in the order done
	entries []har.EncodedEntry
	prompts []*prompts.Prompt
	err     error
}

// startWriteAhead starts writing into the bundle staging directory dir.
// The caller must call close (Network.Finish does).
func startWriteAhead(dir string, redactor *har.Redactor) (*writeAhead, error) {
	root, err := safefs.OpenOneMount(dir)
	if err != nil {
		return nil, err
	}
	a := &writeAhead{redactor: redactor, root: root, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go a.loop()
	return a, nil
}

// add queues x; it never blocks on the work. After close, x is left out
// and the results no longer match the run's exchanges (writeNetwork then
// writes them all itself).
func (a *writeAhead) add(x *har.Exchange) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.queue = append(a.queue, x)
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// close lets the goroutine finish the queue and waits for it.
func (a *writeAhead) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.wake)
	}
	a.mu.Unlock()
	<-a.done
}

func (a *writeAhead) loop() {
	defer close(a.done)
	defer a.root.Close()
	for {
		a.mu.Lock()
		xs := a.queue
		a.queue = nil
		closed := a.closed
		a.mu.Unlock()
		for _, x := range xs {
			a.one(x)
		}
		if closed && len(xs) == 0 {
			return
		}
		if len(xs) == 0 {
			<-a.wake
		}
	}
}

// one encodes x's entry and writes its prompt file; after the first
// error it only counts (the error is the recording's).
func (a *writeAhead) one(x *har.Exchange) {
	a.seqs = append(a.seqs, x.Seq)
	if a.err != nil {
		return
	}
	e, err := har.FromExchange(x, a.redactor)
	if err != nil {
		a.err = fmt.Errorf("network exchange %d (%s %s): %w", x.Seq, x.Request.Method, x.Request.URL, err)
		return
	}
	enc, err := har.EncodeEntry(&e)
	if err != nil {
		a.err = err
		return
	}
	a.entries = append(a.entries, enc)
	p, ok := prompts.Extract(&e)
	if !ok {
		return
	}
	a.prompts = append(a.prompts, p)
	if err := writePrompt(a.root, len(a.prompts), p); err != nil {
		a.err = fmt.Errorf("write prompts/: %w", err)
	}
}

// writePrompt writes p as prompts/NNNN.json (n from 1) under root, the
// bundle's staging directory, creating prompts/ for the first: neither
// is followed if it is a symlink, and the file must not exist.
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

// result returns the entries and prompts written ahead when they are
// those of xs, the run's exchanges in Seq order; ok false otherwise.
// Call it after close.
func (a *writeAhead) result(xs []*har.Exchange) (entries []har.EncodedEntry, ps []*prompts.Prompt, ok bool, err error) {
	if len(a.seqs) != len(xs) {
		return nil, nil, false, nil
	}
	for i, x := range xs {
		if a.seqs[i] != x.Seq {
			return nil, nil, false, nil
		}
	}
	return a.entries, a.prompts, true, a.err
}

// discard removes what was written ahead (prompts/) before writeNetwork
// writes everything itself.
func (a *writeAhead) discard(dir string) error {
	root, err := safefs.OpenOneMount(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(prompts.Dir)
}
