// Package policy is the policy gate (docs/policy.md): a policy's Rego
// files compiled once, the input each intercepted call is judged on and
// the decision (allow, deny, ask), a run's Gate that decides (asking a
// person through package gate) or, on replay, answers as recorded, and
// the audit a bundle keeps of every decision.
package policy
