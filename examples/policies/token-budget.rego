# Stop a run that would spend more than its token budget: an LLM call is
# denied (403) once the tokens of the calls answered so far, plus the
# tokens this call may generate (its max tokens), exceed the budget.
#
#   dal-exec record --policy examples/policies/token-budget.rego --out run1 -- python3 agent.py
package dal

budget := 2000

# What the call may add: its max tokens when it names them.
asked := input.llm.max_tokens if {
	is_number(input.llm.max_tokens)
} else := 0

decision := {"action": "deny", "reason": sprintf("token budget of %d: %d used, this call may add %d", [budget, input.llm.tokens_so_far, asked])} if {
	input.kind == "http"
	input.llm.tokens_so_far + asked > budget
}
