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
		// One chunked-encoding frame per recorded chunk.
		h.Del("Content-Length")
	case withBody:
		h.Set("Content-Length", strconv.Itoa(total))
	}
	status := served.Status
	if status < 200 || status > 999 { // not a final status: nothing sane to serve
		status = http.StatusBadGateway
	}
	w.WriteHeader(status)
	flusher, _ := w.(http.Flusher)
	if served.Streamed && flusher != nil {
		flusher.Flush()
	}

	body := make([]byte, 0, total)
	var chunks []har.Chunk
	start := time.Now()
	for _, c := range served.Chunks {
		if p.cfg.Speed > 0 && c.At > 0 {
			if err := p.pace(r.Context(), start, time.Duration(float64(c.At)/p.cfg.Speed)); err != nil {
				x.Error = "the client closed the connection during the response"
				break
			}
		}
		if len(c.Data) == 0 {
			continue
		}
		body = append(body, c.Data...)
		if served.Streamed {
			chunks = append(chunks, har.Chunk{At: time.Since(start), Data: c.Data})
		}
		if !withBody {
			continue
		}
		if _, err := w.Write(c.Data); err != nil {
			x.Error = "the client closed the connection during the response"
			break
		}
		if served.Streamed && flusher != nil {
			flusher.Flush()
		}
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
}
