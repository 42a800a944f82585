package har

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchRequests are 1,000 distinct chat-completion requests of about
// 1.5 KB, like an agent's conversation turns.
func benchRequests() []Request {
	system := strings.Repeat("You are a careful assistant. ", 30)
	reqs := make([]Request, 1000)
	for i := range reqs {
		body := fmt.Sprintf(`{"model":"gpt-4o-mini","temperature":0.2,"max_tokens":512,"stream":false,"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d: what is %d + %d?"}]}`, system, i, i, i)
		reqs[i] = jsonReq("POST", "https://api.openai.com/v1/chat/completions", body, "Authorization", "Bearer sk-bench-0123456789")
	}
	return reqs
}

func benchLog(b *testing.B, reqs []Request) *Log {
	l := NewLog(nil, "bench")
	for i := range reqs {
		l.Entries = append(l.Entries, mustEntry(b, exchange(i, reqs[i], okResp("application/json", `{"id":"x","choices":[]}`)), nil))
	}
	return l
}

// BenchmarkIndexNext matches live requests against a log of 1,000
// entries; baseline is decoding each request's JSON body, the least a
// matcher that looks at bodies must do.
func BenchmarkIndexNext(b *testing.B) {
	reqs := benchRequests()
	l := benchLog(b, reqs)
	b.Run("next", func(b *testing.B) {
		b.ReportAllocs()
		ix := NewIndex(l, nil, nil)
		for i := 0; b.Loop(); i++ {
			if i%len(reqs) == 0 && i > 0 {
				ix = NewIndex(l, nil, nil) // every entry served: start over
			}
			if _, err := ix.Next(&reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline=json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var v any
			if err := json.Unmarshal(reqs[i%len(reqs)].Body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkKey computes the match key of a 1.5 KB chat request.
func BenchmarkKey(b *testing.B) {
	reqs := benchRequests()
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = Key(&reqs[i%len(reqs)], nil)
		}
	})
	b.Run("baseline=json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var v any
			if err := json.Unmarshal(reqs[i%len(reqs)].Body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFromExchange records one chat exchange with a secret.
func BenchmarkFromExchange(b *testing.B) {
	reqs := benchRequests()
	x := exchange(0, reqs[0], okResp("application/json", `{"id":"x","choices":[{"message":{"content":"42"}}]}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromExchange(x, nil); err != nil {
			b.Fatal(err)
		}
	}
}
