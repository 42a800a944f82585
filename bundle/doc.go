// Package bundle reads and writes dal trace bundles: the signed record of
// one agent run that `dal-exec record` writes and `replay`, `verify`,
// `diff` and `revert` read. It is a format package: it knows files,
// hashes and signatures, not what a run is, and imports nothing else of
// dal. This comment describes the format for anyone who reads bundles.
//
// # Layout
//
// A bundle is a directory, or a gzip (.tgz, .tar.gz) or zstd (.tar.zst)
// tar archive of one, with these entries at its root:
//
//	manifest.json     execution snapshot + the hash of every other file (below)
//	manifest.sig      ed25519 signature of manifest.json's bytes
//	env.json          command, arguments, mode, seed, epoch, guard rails, host
//	clock.json        clock tick streams per process stream
//	network.har       HAR 1.2 of the run's network exchanges
//	prompts/NNNN.json LLM calls
//	fs-diff/          files created or modified by the run, and the deletions
//	fs-pre/           pre-images of modified and deleted files
//	logs/             stdout, stderr, dal's own log
//	syscalls.json     boundary observations
//	replays/NNNN.json replay outcomes, added after signing
//
// Only manifest.json and manifest.sig are required by the format. The
// components (everything else but replays/) are opaque here: each is
// just files that the manifest covers, so a new component slots in
// without a format change. Their contents are described by the packages
// that write them.
//
// # Manifest
//
// manifest.json is an execution snapshot (docs/schema/
// execution-snapshot.schema.json, JSON Schema 2020-12, derived from the
// aiwg execution-snapshot schema v1) with one addition, the object
// "dal":
//
//	"dal": {
//	  "format_version": 1,
//	  "created_by": "dal 0.1.0",
//	  "public_key": "<ed25519 public key, 32 bytes, standard base64>",
//	  "files":      {"env.json": "sha256:<hex>", "fs-diff/a.txt": "sha256:<hex>", ...},
//	  "symlinks":   {"fs-diff/link": "sha256:<hex of the link's target string>"},
//	  "empty_dirs": ["fs-diff/empty"]
//	}
//
// Paths are relative, slash-separated, UTF-8, without empty, "." or ".."
// segments, and JSON object keys come out sorted. Together, files,
// symlinks and empty_dirs describe the whole tree except manifest.json,
// manifest.sig and replays/: a bundle holding anything else, or lacking
// anything listed, is corrupt. Symbolic links are recorded and checked
// as links (the hash of their target string) and never followed. File
// modes, owners and times are not covered; a component that needs them
// records them in its own files.
//
// # Signature
//
// manifest.sig is one line: the standard base64 of the 64-byte ed25519
// signature of manifest.json's exact bytes, then "\n". The manifest
// covers every file, so the signature covers the bundle. Checked against
// the key the manifest names, it proves the bundle intact; checked
// against a key the reader trusts (OpenOptions.TrustedKey, `dal-exec
// verify --key`), it also proves who recorded it. Keys: see LoadKey.
//
// # Reading
//
// Open verifies, in this order: manifest.json parses; format_version is
// known; the manifest conforms to the schema; the signature verifies;
// the tree matches the lists; every hash matches; replays/ holds only
// replay outcomes. The first failure is an *Error naming the file, e.g.
//
//	bundle run1: fs-diff/a.txt does not match its hash in the manifest: the bundle was modified or corrupted
//
// Archives are extracted into a private temporary directory first,
// refusing entries that are not regular files, directories or symbolic
// links, absolute or ".." names, and entries reached through a symbolic
// link (tar-slip).
//
// # Writing
//
// Create stages a bundle in <dir>/.<name>.partial-XXXX beside its
// output; Commit hashes everything, writes and signs the manifest,
// fsyncs files and directories and renames the staging directory to the
// output (or packs it into the output archive) without ever replacing
// an existing path. A crash leaves either a complete bundle or none, and
// at most a staging directory, which Leftovers finds. Archives are
// deterministic: sorted entries, zero owners and times, modes
// normalized to 0644/0755.
//
// # Replays
//
// Replay outcomes go to replays/NNNN.json (0001, 0002, ...; the schema's
// $defs/replay_outcome) after the bundle is signed and are not covered
// by the signature, so adding one never invalidates it. Bundle.
// ReplayStatus summarizes them as the snapshot's replay_status.
//
// # Versioning
//
// dal.format_version is an integer, 1 for this layout. A reader refuses
// a version above its own ("upgrade dal") and reads every older version
// it has ever read. The version is raised only for changes that a reader
// of the previous version would misread: a renamed or retyped field, a
// new meaning for a file, a change to what the hashes or the signature
// cover. Additions that an older reader may ignore — a new optional
// manifest field, a new component file (covered by the file map like
// any other) — keep the version, which is why the schema leaves objects
// open. The execution snapshot's own "version" ("1.0") follows the
// snapshot schema and is independent.
package bundle
