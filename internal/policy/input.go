package policy

import (
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
)

// Input is one call the policy decides about: Doc is input as the policy
// sees it (docs/schema/policy-input.schema.json), also shown to people
// asked and kept in the audit; Kind and Subject name the call in one line
// ("exec", "git push origin main"); Key is what replay matches it by.
type Input struct {
	Kind    string
	Subject string
	Key     string
	Doc     map[string]any
}

// HTTP is the input of a request through dal's proxy. The URL, headers
// and body are redacted by red (credentials replaced), the body parsed
// when it is JSON; an LLM call (package prompts) adds llm with the run's
// tokens so far (tokens of the calls answered before this one).
func HTTP(x *har.Exchange, red *har.Redactor, tokensSoFar int) (*Input, error) {
	e, err := har.FromExchange(x, red)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{"kind": "http", "method": e.Request.Method, "url": e.Request.URL}
	u, err := url.Parse(e.Request.URL)
	if err == nil {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		p, _ := strconv.Atoi(port)
		doc["scheme"], doc["host"], doc["port"], doc["path"] = u.Scheme, strings.ToLower(host), p, u.EscapedPath()
	}
	// Where the request goes, by what the proxy dials: the CONNECT
	// target, the absolute URL's host or the transparent address, never
	// the Host header. The policy decides before any name is resolved
	// (a denied request reaches no DNS server), so the address connected
	// to is in network.har, not here.
	if host, port, err := net.SplitHostPort(x.Dest); err == nil {
		p, _ := strconv.Atoi(port)
		doc["destination"] = map[string]any{"host": destHost(host), "port": p}
	}
	query := map[string]any{}
	for _, q := range e.Request.QueryString {
		l, _ := query[q.Name].([]any)
		query[q.Name] = append(l, q.Value)
	}
	doc["query"] = query
	headers := map[string]any{}
	for _, h := range e.Request.Headers {
		k := strings.ToLower(h.Name)
		l, _ := headers[k].([]any)
		headers[k] = append(l, h.Value)
	}
	doc["headers"] = headers
	doc["body"] = nil
	if body, err := e.RequestBody(); err == nil && len(body) > 0 {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			doc["body"] = v
		}
		doc["body_size"] = len(body)
	}
	if p, ok := prompts.Extract(&e); ok {
		llm := map[string]any{"provider": p.Provider, "api": p.API, "model": p.Model, "tokens_so_far": tokensSoFar, "max_tokens": nil}
		for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
			if raw, ok := p.Parameters[k]; ok {
				if n, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
					llm["max_tokens"] = n
					break
				}
			}
		}
		doc["llm"] = llm
	}
	subject := e.Request.Method + " " + e.Request.URL
	return &Input{Kind: "http", Subject: subject, Key: "http " + subject, Doc: doc}, nil
}

// destHost is host as the policy sees it: lowercase, without a trailing
// dot.
func destHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// Exec is the input of a program the agent's tree runs.
func Exec(path string, argv []string, cwd, stream string, truncated bool) *Input {
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	doc := map[string]any{"kind": "exec", "path": path, "argv": args, "cwd": cwd, "stream": stream}
	if truncated {
		doc["truncated"] = true
	}
	subject := strings.Join(quoteArgs(argv), " ")
	return &Input{Kind: "exec", Subject: subject, Key: "exec " + cwd + "\x00" + strings.Join(argv, "\x00"), Doc: doc}
}

// Write is the input of a write outside the workspace (the sandbox
// refused it; the policy sees it afterwards, docs/policy.md).
func Write(path, op string) *Input {
	doc := map[string]any{"kind": "write", "path": path, "operation": op}
	subject := op + " " + path
	return &Input{Kind: "write", Subject: subject, Key: "write " + subject, Doc: doc}
}

// Connect is the input of a connection to a service on the sandbox's
// loopback ("127.0.0.1:8080").
func Connect(addr, stream string) *Input {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	doc := map[string]any{"kind": "connect", "address": addr, "host": host, "port": p, "stream": stream}
	return &Input{Kind: "connect", Subject: addr, Key: "connect " + addr, Doc: doc}
}

// quoteArgs quotes the arguments a shell would split, for reading only.
func quoteArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>*?()[]{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}
