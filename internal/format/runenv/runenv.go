// Package runenv is the format of a bundle's env.json: the command, its
// environment and its machine, and what the run was like. Package record
// writes it; replay, revert, show and consistency read it. It imports
// nothing of dal but the other formats.
package runenv

import (
	"time"

	"github.com/dal-runtime/dal/internal/format/fsdiff"
)

// Version is the env.json format version.
const Version = 1

// Env is env.json: everything needed to re-run the command the same way,
// and what the run was like. Variables passed with --keep-env are stored by
// value when they are plain settings and by name only when they are
// secrets (package record's secrets.go), so a bundle replays by itself and a token kept for
// the agent never reaches disk.
type Env struct {
	Version   int       `json:"version"`
	Command   []string  `json:"command"`
	Cwd       string    `json:"cwd"` // relative to the workspace, "." at its root
	Workspace string    `json:"workspace"`
	Mode      string    `json:"mode"`
	Seed      uint64    `json:"seed"`
	Epoch     time.Time `json:"epoch"`
	QuantumNS int64     `json:"quantum_ns"`
	CPUs      []int     `json:"cpus"`
	Timeout   string    `json:"timeout,omitempty"`

	// GuardRails are the variables dal set, by name; Inherited the
	// allowlisted ones passed through; KeptValues the --keep-env plain
	// settings with their values; Secrets the --keep-env names that are
	// credentials (never their values). Kept is what bundles of earlier
	// releases hold instead: every kept name with the SHA-256 of its value.
	GuardRails map[string]string `json:"guard_rails"`
	Inherited  map[string]string `json:"inherited"`
	Kept       map[string]string `json:"kept,omitempty"`
	KeptValues map[string]string `json:"kept_values,omitempty"`
	Secrets    []string          `json:"secrets,omitempty"`
	// Scrubbed are the bundle files (slash paths) in which a secret's
	// value was replaced by [REDACTED].
	Scrubbed []string `json:"scrubbed,omitempty"`

	Host       Host              `json:"host"`
	Runtimes   map[string]string `json:"runtimes"`
	DalVersion string            `json:"dal_version"`

	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	ExitCode   int       `json:"exit_code"`
	TimedOut   bool      `json:"timed_out,omitempty"`

	SelfContained bool `json:"self_contained"`
	Applied       bool `json:"applied"`
	// DeniedWrites are the agent's attempts to write outside the
	// workspace, which failed inside the sandbox.
	DeniedWrites []DeniedWrite `json:"denied_writes"`
	// Uncaptured are the fifos, sockets and device nodes the agent made
	// in the workspace, which a bundle does not hold.
	Uncaptured []fsdiff.Uncaptured `json:"uncaptured,omitempty"`
	// Network is the capture's setup; nil when the run's network was
	// passthrough (default mode).
	Network *Network `json:"network,omitempty"`
}

// Host describes the machine a run was recorded on.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
}

// Network is env.json's network section.
type Network struct {
	// Captured: the agent ran in its own network namespace behind dal's proxy.
	Captured bool `json:"captured"`
	// Proxy is the address the agent's proxy variables name.
	Proxy string `json:"proxy"`
	// Mirrored are the host loopback addresses the agent could reach at
	// the same address, through the proxy.
	Mirrored []string `json:"mirrored"`
	// Allowed are the host's own addresses the proxy could connect to
	// (--allow-loopback, and kept *_BASE_URL variables on loopback).
	Allowed []string `json:"allowed,omitempty"`
	// AllowedAddresses are the --allow-address values the proxy could
	// connect to: addresses and networks (any port), or ip:port.
	AllowedAddresses []string `json:"allowed_addresses,omitempty"`
	// Refused are the host's own addresses the agent asked for and the
	// proxy refused (403).
	Refused []string `json:"refused,omitempty"`
	// RedactHeaders and RedactFields are the redaction settings beyond the
	// defaults, so a replay matches as the record did.
	RedactHeaders []string `json:"redact_headers,omitempty"`
	RedactFields  []string `json:"redact_fields,omitempty"`
	// Blocked are connections to other machines, which failed.
	Blocked []string `json:"blocked,omitempty"`
	// NotCaptured are the proxy's reports of traffic it did not capture.
	NotCaptured []string `json:"not_captured,omitempty"`
	// Ordered: the proxy handed the agent its responses one at a time,
	// each once its process tree had settled, in an order that depends
	// only on what it sent (package netcap's order.go). OrderEscapes are the
	// responses handed over before the tree settled (a thread that kept
	// running past the stall limit): their order was latency's.
	Ordered      bool  `json:"ordered,omitempty"`
	OrderEscapes int64 `json:"order_escapes,omitempty"`
}

// DeniedWrite is an attempt of the agent to write outside the
// workspace, which failed inside the sandbox (package sandbox's
// DeniedWrite, as env.json holds it).
type DeniedWrite struct {
	Op   string `json:"op"`   // the system call: openat, mkdir, unlinkat, io_uring_setup...
	Path string `json:"path"` // absolute, as resolved in the sandbox; "" for io_uring_setup
}
