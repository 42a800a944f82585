package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/internal/runner"
)

// isTerminal reports whether w is a terminal (runner.IsTerminal, the one
// check dal-exec has).
func isTerminal(w io.Writer) bool { return runner.IsTerminal(w) }

// progressBar keeps a one-line bar at the bottom of a terminal while the
// lines written through it scroll above.
type progressBar struct {
	mu                  sync.Mutex
	out                 io.Writer
	what                string
	done, failed, total int
	start               time.Time
	partial             bytes.Buffer
	shown               bool
}

func newProgressBar(out io.Writer, what string, total int) *progressBar {
	p := &progressBar{out: out, what: what, total: total, start: time.Now()}
	p.mu.Lock()
	p.draw()
	p.mu.Unlock()
	return p
}

// Write prints whole lines above the bar.
func (p *progressBar) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial.Write(b)
	data := p.partial.Bytes()
	i := bytes.LastIndexByte(data, '\n')
	if i < 0 {
		return len(b), nil
	}
	p.clear()
	p.out.Write(data[:i+1])
	rest := append([]byte(nil), data[i+1:]...)
	p.partial.Reset()
	p.partial.Write(rest)
	p.draw()
	return len(b), nil
}

// Update sets the counts and redraws.
func (p *progressBar) Update(done, failed, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.failed, p.total = done, failed, total
	p.clear()
	p.draw()
}

// Finish removes the bar.
func (p *progressBar) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

func (p *progressBar) clear() {
	if p.shown {
		io.WriteString(p.out, "\r\x1b[2K")
		p.shown = false
	}
}

func (p *progressBar) draw() {
	const width = 30
	n := 0
	if p.total > 0 {
		n = p.done * width / p.total
	}
	eta := ""
	if p.done > 0 && p.done < p.total {
		left := time.Duration(float64(time.Since(p.start)) / float64(p.done) * float64(p.total-p.done))
		eta = ", about " + left.Round(time.Second).String() + " left"
	}
	failed := ""
	if p.failed > 0 {
		failed = fmt.Sprintf(", %d failed", p.failed)
	}
	fmt.Fprintf(p.out, "[%s%s] %d/%d %s%s%s", strings.Repeat("#", n), strings.Repeat(".", width-n), p.done, p.total, p.what, failed, eta)
	p.shown = true
}
