package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/internal/netcap"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
)

// StrictLLMFile lists, in a bundle recorded in strict mode, the LLM calls
// that a live re-execution cannot reproduce: sampled above temperature 0
// (or at the API's default, 1), or without a seed where the API takes one.
const StrictLLMFile = "strict-llm.json"

// StrictLLM is strict-llm.json.
type StrictLLM struct {
	// Calls are the loose calls, in the order they were made.
	Calls []LooseCall `json:"calls"`
}

// LooseCall is one LLM call that is not reproducible live.
type LooseCall struct {
	Prompt string `json:"prompt"` // prompts/NNNN.json
	API    string `json:"api"`
	Model  string `json:"model,omitempty"`
	URL    string `json:"url"`
	// Why lists the reasons: "temperature 0.7", "temperature unset (the
	// API's default is 1)", "no seed".
	Why []string `json:"why"`
}

// looseness says why an LLM call with these request parameters is not
// reproducible live; nil when it is (temperature 0, and a seed for the
// chat completions API, the one that takes one).
func looseness(api string, params map[string]json.RawMessage) []string {
	var why []string
	switch raw, ok := params["temperature"]; {
	case !ok || string(raw) == "null":
		why = append(why, "temperature unset (the API's default is 1)")
	default:
		var t float64
		if err := json.Unmarshal(raw, &t); err != nil {
			why = append(why, "temperature "+string(raw)+" (not a number)")
		} else if t > 0 {
			why = append(why, "temperature "+strconv.FormatFloat(t, 'g', -1, 64))
		}
	}
	if api == prompts.ChatCompletions {
		if raw, ok := params["seed"]; !ok || string(raw) == "null" {
			why = append(why, "no seed")
		}
	}
	return why
}

// lintLLM writes strict-llm.json and reports the loose calls on dal's
// log, in strict mode only.
func (r *recording) lintLLM() error {
	if r.spec.Mode != "strict" || r.nw == nil || len(r.nw.prompts) == 0 {
		return nil
	}
	var lint StrictLLM
	for i, p := range r.nw.prompts {
		if why := looseness(p.API, p.Parameters); len(why) > 0 {
			lint.Calls = append(lint.Calls, LooseCall{Prompt: fmt.Sprintf("prompts/%04d.json", i+1), API: p.API,
				Model: p.Model, URL: p.URL, Why: why})
		}
	}
	if len(lint.Calls) == 0 {
		return nil
	}
	reportLoose(r.spec.Log, lint.Calls)
	b, err := json.MarshalIndent(lint, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.w.Dir(), StrictLLMFile), append(b, '\n'), 0o644)
}

// reportLoose says on w, in one line, how many calls are not reproducible
// live and why, e.g. "dal: not reproducible live: 3 LLM calls at
// temperature 0.7, 1 without a seed".
func reportLoose(w io.Writer, calls []LooseCall) {
	count := map[string]int{}
	for _, c := range calls {
		for _, why := range c.Why {
			count[why]++
		}
	}
	reasons := make([]string, 0, len(count))
	for why := range count {
		reasons = append(reasons, why)
	}
	sort.Strings(reasons)
	parts := make([]string, 0, len(reasons))
	for _, why := range reasons {
		n := count[why]
		noun := "LLM calls"
		if n == 1 {
			noun = "LLM call"
		}
		switch {
		case why == "no seed":
			parts = append(parts, fmt.Sprintf("%d %s without a seed", n, noun))
		case strings.HasPrefix(why, "temperature unset"):
			parts = append(parts, fmt.Sprintf("%d %s without a temperature (the API's default is 1)", n, noun))
		default:
			parts = append(parts, fmt.Sprintf("%d %s at %s", n, noun, why))
		}
	}
	fmt.Fprintf(w, "dal: not reproducible live: %s (listed in %s; --enforce-strict-llm refuses such calls)\n", strings.Join(parts, ", "), StrictLLMFile)
}

// StrictLLMRefusal is the --enforce-strict-llm hook for the proxy
// (NetworkOptions.Before): an LLM call sampled above temperature 0, or
// without a seed where the API takes one, is answered 400 by dal and
// never leaves the machine.
func StrictLLMRefusal(_ context.Context, x *har.Exchange) *netcap.Answer {
	e, err := har.FromExchange(x, nil)
	if err != nil {
		return nil
	}
	p, ok := prompts.Extract(&e)
	if !ok {
		return nil
	}
	why := looseness(p.API, p.Parameters)
	if len(why) == 0 {
		return nil
	}
	fix := "send temperature 0"
	if p.API == prompts.ChatCompletions {
		fix += " and a seed"
	}
	return &netcap.Answer{Status: 400, By: "strict-llm", Type: "dal_strict_llm",
		Message: fmt.Sprintf("dal refused this LLM call under --enforce-strict-llm (%s): %s so that it can be reproduced", strings.Join(why, ", "), fix)}
}
