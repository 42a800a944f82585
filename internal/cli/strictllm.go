package cli

import ucli "github.com/urfave/cli/v2"

// enforceStrictLLMFlag is --enforce-strict-llm of record and replay --live.
func enforceStrictLLMFlag() ucli.Flag {
	return &ucli.BoolFlag{Name: "enforce-strict-llm", EnvVars: []string{"DAL_ENFORCE_STRICT_LLM"},
		Usage: "answer the agent's LLM calls made at a temperature above 0 (or unset) or without a seed (chat completions) with 400 from the proxy instead of forwarding them; strict mode lists them in strict-llm.json either way"}
}
