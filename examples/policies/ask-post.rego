# Ask a person before any POST to a host that is not an LLM provider: the
# request waits until someone answers on dal-exec's terminal, with
# `dal-exec approve ID` / `dal-exec deny ID`, or on dald's Gate page
# (denied after --ask-timeout, 5m by default).
#
#   dal-exec record --policy examples/policies/ask-post.rego --out run1 -- python3 agent.py
package dal

llm_hosts contains host if {
	some host in {
		"api.openai.com",
		"api.anthropic.com",
		"generativelanguage.googleapis.com",
		"api.mistral.ai",
		"api.groq.com",
		"openrouter.ai",
	}
}

decision := {"action": "ask", "reason": sprintf("POST to %s, which is not an LLM provider", [input.destination.host])} if {
	input.kind == "http"
	input.method == "POST"
	not input.destination.host in llm_hosts
}
