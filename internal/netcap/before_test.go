package netcap

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// TestBeforeAnswers: a request Config.Before answers never reaches the
// upstream, the client gets the answer, and the exchange records it so
// that a replaying proxy serves it again; other requests go through.
func TestBeforeAnswers(t *testing.T) {
	t.Parallel()
	tw := newTripwire(t)
	before := func(_ context.Context, x *har.Exchange) *Answer {
		if strings.HasSuffix(x.Request.URL, "/deny") {
			return &Answer{Status: http.StatusForbidden, By: "policy", Type: "dal_policy_denied", Message: "dal policy: no"}
		}
		return nil
	}
	r := newRig(t, Config{Before: before})
	c := proxyClient(r.explicit(), nil)
	resp, body := get(t, c, "http://"+tw.addr()+"/deny")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Dal-Proxy") != "policy" || !strings.Contains(string(body), `"dal_policy_denied"`) {
		t.Fatalf("answer: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if n := tw.accepted.Load(); n != 0 {
		t.Fatalf("the upstream got %d connections for an answered request", n)
	}
	r.shutdown()
	x := r.one()
	if x.Answered != "policy" || x.Response == nil || x.Response.Status != http.StatusForbidden {
		t.Fatalf("recorded exchange: answered %q response %+v", x.Answered, x.Response)
	}
	e, err := har.FromExchange(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Dal.Answered != "policy" {
		t.Fatalf("HAR entry does not say who answered: %+v", e.Dal)
	}

	// Replay serves the recorded answer (the source has it).
	rp := newRig(t, Config{Source: newRecordedSource([]*har.Exchange{x})})
	resp, body = get(t, proxyClient(rp.explicit(), nil), "http://"+tw.addr()+"/deny")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "dal policy: no") {
		t.Fatalf("replayed answer: %d %s", resp.StatusCode, body)
	}
}
