# Allow the agent's HTTP requests to LLM providers only: any other host
# gets 403 from dal's proxy, naming the reason. It decides on
# input.destination, the server dal's proxy connects to (a request inside
# a tunnel that names another server in its Host header never gets here:
# dal answers it 421).
#
#   dal-exec record --policy examples/policies/allow-llm-hosts.rego --out run1 -- python3 agent.py
#
# Add hosts from a file of your own in the same directory (package dal):
#   llm_hosts contains "llm.internal.example.com"
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

decision := {"action": "allow", "reason": "LLM provider"} if {
	input.kind == "http"
	input.destination.host in llm_hosts
}

decision := {"action": "deny", "reason": sprintf("%s is not an LLM provider", [input.destination.host])} if {
	input.kind == "http"
	not input.destination.host in llm_hosts
}
