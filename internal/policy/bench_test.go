package policy

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkDecideHTTP is the gate's cost per proxied request with each
// example policy: building the input from the exchange (redaction, body
// and LLM parsing) and evaluating the prepared query. It reports the
// median and the 99th percentile of single decisions (p50-ns, p99-ns);
// the bound is a median of 50 µs.
func BenchmarkDecideHTTP(b *testing.B) {
	x := exchange("POST", "https://api.openai.com/v1/chat/completions", chat, nil)
	for _, name := range []string{"allow-llm-hosts.rego", "deny-git-push.rego", "ask-post.rego", "token-budget.rego"} {
		b.Run(name, func(b *testing.B) {
			p := load(b, name)
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				in, err := HTTP(x, nil, 100)
				if err != nil {
					b.Fatal(err)
				}
				v, err := p.input(in)
				if err != nil {
					b.Fatal(err)
				}
				p.Decide(ctx, v)
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkEvaluate is the evaluation alone (the input already built and
// converted), to tell it from the input's cost in BenchmarkDecideHTTP.
func BenchmarkEvaluate(b *testing.B) {
	x := exchange("POST", "https://api.openai.com/v1/chat/completions", chat, nil)
	in, err := HTTP(x, nil, 100)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"allow-llm-hosts.rego", "token-budget.rego"} {
		b.Run(name, func(b *testing.B) {
			p := load(b, name)
			v, err := p.input(in)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for range b.N {
				p.Decide(ctx, v)
			}
		})
	}
}
