package netcap

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// replay answers the request from the Source (replay mode). Nothing here
// can reach the network: the proxy has no dialer.
func (p *Proxy) replay(w http.ResponseWriter, r *http.Request, x *har.Exchange, addr string) {
	asked := time.Now()
	x.Send = asked.Sub(x.Started)
	served, err := p.cfg.Source.Next(&x.Request)
	if err == nil && served == nil {
		err = errors.New("the replay source returned no response")
	}
	headersAt := time.Now()
	x.Wait = headersAt.Sub(asked)
	var failed *har.RecordedFailure
	if errors.As(err, &failed) {
		// The exchange failed when it was recorded: fail it the same way,
		// with the answer the client got then. Not drift, not reported.
		x.Error = failed.Err
		writeError(w, http.StatusBadGateway, "dal record: "+strings.TrimPrefix(failed.Err, upstreamErrPrefix), "dal_upstream_error", "X-Dal-Record", "error")
		x.Receive = time.Since(headersAt)
		return
	}
	if err != nil {
		x.Error = "replay miss: " + err.Error()
		p.report(KindReplayMiss, addr,
			fmt.Sprintf("replay has no recorded response for %s %s (%v): answered 502", x.Request.Method, x.Request.URL, err))
		writeError(w, http.StatusBadGateway, "dal replay: "+err.Error(), "dal_replay_miss", "X-Dal-Replay", "miss")
		x.Receive = time.Since(headersAt)
		return
	}

	if served.HoldOpen && served.Status == 0 {
		// The client left before the response arrived when recorded.
		p.holdOpen(w, r, x, &har.ClientClose{Truncated: true})
	}
	withBody := bodyAllowed(r.Method, served.Status)
	var total int
	for _, c := range served.Chunks {
		total += len(c.Data)
	}
	h := w.Header()
	copyEndToEnd(h, served.Header)
	suppressDefaults(h, served.Header)
	switch {
	case served.Streamed:
		// A stream keeps a length that fits what is sent (or the
		// recorded one, when the client left early); otherwise one
		// chunked-encoding frame per recorded chunk.
		if cl := h.Get("Content-Length"); cl != strconv.Itoa(total) && !served.HoldOpen {
			h.Del("Content-Length")
		}
	case withBody && !served.HoldOpen:
		h.Set("Content-Length", strconv.Itoa(total))
	}
	status := served.Status
	if status < 200 || status > 999 { // not a final status: nothing sane to serve
		status = http.StatusBadGateway
	}
	w.WriteHeader(status)
	var sw *streamWriter // nil: not streamed
	if served.Streamed {
		sw = newStreamWriter(w, r, p.base)
		sw.headers() // a failure shows at the first write
		// A stream's turn ends with its headers (order.go).
		p.endTurnOf(w, r)
		if p.order != nil {
			if info, ok := r.Context().Value(connInfoKey{}).(*connInfo); ok {
				sw.stream = p.order.stream(info.client)
				defer sw.stream.end()
			}
		}
	}

	body := make([]byte, 0, total)
	var (
		chunks    []har.Chunk
		delivered int64
		gone      bool
	)
	// The response is the one served, every piece, even those a client
	// that left did not get.
	start := time.Now()
	for _, c := range served.Chunks {
		if !gone && p.cfg.Speed > 0 && c.At > 0 {
			gone = p.pace(r.Context(), start, time.Duration(float64(c.At)/p.cfg.Speed)) != nil
		}
		if len(c.Data) == 0 {
			continue
		}
		body = append(body, c.Data...)
		if served.Streamed {
			chunks = append(chunks, har.Chunk{At: time.Since(start), Data: c.Data})
		}
		if !withBody || gone {
			continue
		}
		if err := writeFlush(w, sw, c.Data); err != nil {
			gone = true
			continue
		}
		delivered += int64(len(c.Data))
	}
	if sw != nil {
		// The last chunk is a read of its own too, and what a client
		// that leaves read of it is to be known.
		sw.settle()
		gone = gone || sw.left
	}
	x.Receive = time.Since(headersAt)
	x.Response = &har.Response{
		Status:     served.Status,
		StatusText: served.StatusText,
		Proto:      "HTTP/1.1",
		Header:     served.Header.Clone(),
		Body:       body,
		Chunks:     chunks,
		Streamed:   served.Streamed,
	}
	// The client closed early: an ordinary event, as when recording,
	// with what it read.
	cc := &har.ClientClose{Bytes: delivered, Truncated: served.HoldOpen}
	if sw != nil {
		read, exact := sw.consumed()
		cc.Bytes, cc.Chunks, cc.Read = read, chunksWithin(chunks, read), exact
		if served.HoldOpen {
			// It is handed the pieces it read when recorded, then closes
			// again: the close is recorded with those. Whether it reads
			// the last of them before it closes may be a race of its own
			// (asyncio's TLS reads on while it closes, as long as pieces
			// come), which is not the replay's to show: Read says it.
			cc.Bytes, cc.Chunks, cc.Read = int64(len(body)), len(chunks), exact && read == int64(len(body))
		}
	}
	switch {
	case served.HoldOpen:
		if !gone {
			http.NewResponseController(w).Flush()
		}
		p.holdOpen(w, r, x, cc)
	case gone:
		x.ClientClosed = cc
	}
}

// holdOpen waits, with the response neither ended nor broken, until the
// client closes the connection (it did so when recorded, having read
// what was sent) or the proxy shuts down, then closes the connection.
// The deferred recording of x still happens.
func (p *Proxy) holdOpen(w http.ResponseWriter, r *http.Request, x *har.Exchange, cc *har.ClientClose) {
	p.endTurnOf(w, r)
	<-r.Context().Done()
	x.ClientClosed = cc
	x.Receive = time.Since(x.Started) - x.Send - x.Wait
	panic(http.ErrAbortHandler)
}
