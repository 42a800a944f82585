// Package format holds the formats layer's rule, which its test holds:
// the packages that define a bundle's files import nothing of dal but
// each other, and the packages that only read bundles (dal-exec show)
// import formats and bundle, never a mechanism.
//
// The format packages: fsdiff (fs-diff/changes.json, the mirror paths),
// runenv (env.json), internal/boundary (syscalls.json),
// internal/netcap/har (network.har) and internal/netcap/prompts
// (prompts/NNNN.json). Package bundle is the container; it imports only
// helpers (safefs, atomicfile, digest).
package format
