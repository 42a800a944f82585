# Deny `git push` (to any remote) and `rm -rf /` anywhere in the agent's
# process tree: the exec fails with EACCES ("Permission denied"), the
# agent goes on, and the bundle lists the decision.
#
#   dal-exec record --policy examples/policies/deny-git-push.rego --out run1 -- ./agent.sh
package dal

program := base if {
	parts := split(input.path, "/")
	base := parts[count(parts) - 1]
}

decision := {"action": "deny", "reason": "git push is not allowed for agents"} if {
	input.kind == "exec"
	program == "git"
	"push" in input.argv
}

decision := {"action": "deny", "reason": "rm -rf / is not allowed"} if {
	input.kind == "exec"
	program == "rm"
	some flag in input.argv
	regex.match(`^-[a-zA-Z]*(r[a-zA-Z]*f|f[a-zA-Z]*r)`, flag)
	some target in input.argv
	target in {"/", "/*"}
}
