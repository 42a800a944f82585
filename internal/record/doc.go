// Package record records an agent run into a trace bundle: the
// orchestration behind dal-exec record, over internal/runner,
// internal/sandbox, internal/netcap and the bundle format. Record is a
// sequence of named steps (record.go): prepare, sandbox, run, select the
// agent's iterations, capture, write the records, commit, apply.
//
// It also holds what a replay builds the same way (package replay imports
// it; nothing here imports replay): env.json (RunEnv), the sandbox every
// record and replay runs in (SandboxConfig, ArgMounts, VirtualConfig,
// WrapInSandbox, NewStage), the run's network behind dal's proxy
// (Network), the secret scrub (Scrubber, Placeholder) and the policy
// gate's hooks (HTTPGate, SandboxGate).
package record
