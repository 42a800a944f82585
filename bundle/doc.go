// Package bundle reads and writes dal trace bundles: the signed record of
// one agent run that `dal-exec record` writes and `replay`, `verify`,
// `diff` and `revert` read. It is a format package: it knows files,
// hashes and signatures, not what a run is. The only part of dal it
// imports is internal/safefs, through which it touches every bundle tree
// (a bundle is hostile, docs/design.md §12). This comment describes the format
// for anyone who reads bundles.
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
//	replays/NNNN.json.sig  the replayer's signature of that outcome
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
// against a key the reader trusts, it also proves who recorded it. Keys:
// see LoadKey.
//
// # Trust
//
// A reader trusts a set of public keys (LoadTrust): the user's own key
// (DefaultKeyPath's .pub, or the public half of the key itself), keys
// named with `--key FILE`, and the trusted-keys file
// (DefaultTrustedKeysPath: $DAL_TRUSTED_KEYS, else
// ~/.config/dal/trusted_keys). That file holds one key per line, the
// standard base64 of the 32 key bytes as in a manifest's public_key and
// the last line of a .pub file, then optionally a space or tab and a
// comment; blank lines and lines starting with "#" are ignored:
//
//	# people and machines whose bundles I replay
//	K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA= alice@laptop
//	GxWIOfiqM56Ju1CxYD6Q7Gjg/VVl/hCnyzJyn933Bwo= ci@build
//
// A malformed line is an error naming the line. The file, and the own
// key's files, must not be writable by group or others (another user
// could make you trust their bundles). Keys are named in messages by
// Fingerprint: "SHA256:" and the unpadded base64 of the SHA-256 of the
// key bytes.
//
// With OpenOptions.Trust set, Open refuses a bundle signed by any other
// key (ErrUntrusted) in one sentence naming the signer's fingerprint and
// TrustSignerFlag ("--trust-signer FINGERPRINT"), which accepts that one
// signer for one command (TrustOptions.Signers). AllowUntrusted opens it
// anyway and Bundle.Signer says so (`dal-exec verify` without --key).
// OpenOptions.TrustedKey keeps its older meaning: the one key the bundle
// must be signed with.
//
// # Reading
//
// Open verifies, in this order: manifest.json parses; format_version is
// known; the manifest conforms to the schema; the signature verifies;
// the signer is trusted (when the reader says whom it trusts); the tree
// matches the lists; every hash matches. The first failure is an *Error
// naming the file, e.g.
//
//	bundle run1: fs-diff/a.txt does not match its hash in the manifest: the bundle was modified or corrupted
//
// Every read goes through internal/safefs from a descriptor of the
// bundle's root (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): no
// symbolic link is followed, in any path component, and a fifo or a
// device where a file should be is refused without being opened for
// reading. Callers read component files with OpenFile, ReadFile or Root,
// not through File's path.
//
// # Archives
//
// dal writes manifest.json and manifest.sig as an archive's first two
// entries, then everything else in sorted order. Open extracts an
// archive into a private temporary directory (TMPDIR, or
// OpenOptions.TempDir), creating every entry through internal/safefs
// with O_CREAT|O_EXCL|O_NOFOLLOW beneath that directory, and refuses:
// entries that are not regular files, directories or symbolic links
// (hard links, devices, fifos, sparse files); absolute, "..", empty or
// non-UTF-8 names; an entry below a symbolic link or a file, or one that
// appears twice (tar-slip). Symbolic links are created as links (a
// bundle records links as links) and never followed.
//
// When manifest.json and manifest.sig come first, Open checks them (the
// first five checks above, trust included) before extracting anything
// else, and then refuses at once any entry the manifest does not list;
// in replays/ it extracts only NNNN.json and NNNN.json.sig regular files
// (at most 20,000) and skips the rest with a warning. Archives written
// otherwise (other tools, dal before this layout) are checked after
// extraction.
//
// Limits (ExtractLimits), checked while the archive streams, each before
// the entry that would exceed it is written:
//
//	bytes             the sizes entries declare, summed: 8 GiB (--max-extract-bytes)
//	free space        never leave less than 5% (at most 1 GiB) of the temporary filesystem free
//	entries           1,000,000 (--max-extract-entries)
//	before manifest   10,000 entries before a manifest.json (--max-extract-entries)
//	ratio             once 256 MiB are written, at most 1000 bytes per compressed byte read
//	                  (lifted by --max-extract-bytes)
//	zstd window       128 MiB (the zstd tool's own default)
//
// A 1.6 MB archive that claims 50 GiB is refused at the entry that
// crosses 8 GiB, before its data is read. Limit refusals are ErrLimit;
// nothing extracted is kept.
//
// # Writing
//
// Create stages a bundle in <dir>/.<name>.partial-XXXX beside its
// output; Commit hashes everything, writes and signs the manifest,
// syncs the staging directory's filesystem (syncfs(2): every file and
// directory on disk, one device flush) and renames the staging directory
// to the output (or packs it into the output archive) without ever replacing
// an existing path. A crash leaves either a complete bundle or none, and
// at most a staging directory, which Leftovers finds. Archives are
// deterministic: sorted entries, zero owners and times, modes
// normalized to 0644/0755.
//
// # Replays
//
// Replay outcomes go to replays/NNNN.json (0001, 0002, ...; the schema's
// $defs/replay_outcome) after the bundle is signed and are not covered
// by the bundle's signature, so adding one never invalidates it. Each is
// signed by whoever replayed (AddSignedReplay): the outcome names the
// replayer's public key ("signer") and the digest of the manifest.json
// it replayed ("manifest", "sha256:<hex>"), and replays/NNNN.json.sig
// holds the ed25519 signature of the outcome file's exact bytes, encoded
// as manifest.sig is. The signature is written first, claiming the
// number.
//
// Open counts an outcome (Bundle.Replays, ReplayStatus) only when its
// signature verifies, it names this bundle's manifest, and its signer is
// trusted. Any other outcome (unsigned, as older dal wrote them; signed
// by an untrusted key; moved from another bundle; changed after signing;
// unreadable) is listed in Bundle.Unverified with the reason. Since
// anyone can add files to replays/, nothing there makes Open fail: a
// stray file or directory, a signature without its outcome, or replays
// not being a directory is a Bundle.Warnings entry.
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
