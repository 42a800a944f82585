package cli

import (
	"fmt"
	"io"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/internal/termsafe"
	ucli "github.com/urfave/cli/v2"
)

// VerifyCommand is `dal-exec verify`.
func VerifyCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "verify",
		Usage:     "check a bundle's integrity and signature (no re-run)",
		ArgsUsage: "BUNDLE",
		Description: `Checks the format version, the manifest against the execution-snapshot schema, the ed25519
signature over manifest.json, and the hash of every file. Names the first file that fails.

Says whether the signer is a key you trust: your own key, a key given with --key, or one listed in
the trusted-keys file (~/.config/dal/trusted_keys: one base64 public key per line, as in the last line
of a .pub file, then an optional comment). Without --key an intact bundle from any signer verifies;
with --key it must be signed by that key.

Replays stored in the bundle count only when signed by a trusted key for this bundle; the others are
listed as unverified, and stray files in replays/ as warnings.

Examples:
   dal-exec verify run1
   dal-exec verify --key ~/.config/dal/signing.key.pub run1.tar.zst
   dal-exec verify --max-extract-bytes 32GiB big-run.tar.zst
   dal-exec verify --json run1 | jq .signer.trusted`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "key", Usage: "require the bundle to be signed by this public key (.pub)"},
			&ucli.StringFlag{Name: "trusted-keys", EnvVars: []string{"DAL_TRUSTED_KEYS"}, Value: bundle.DefaultTrustedKeysPath(),
				Usage: "file of trusted public keys, one per line"},
			&ucli.StringFlag{Name: "max-extract-bytes", Usage: "let an archive bundle expand to this size (default 8GiB; also lifts the compression-ratio guard)"},
			&ucli.IntFlag{Name: "max-extract-entries", Usage: "let an archive bundle hold this many entries (default 1000000)"},
			jsonFlag("the verdict, also on a bundle that fails,"),
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageError{Err: fmt.Errorf("verify takes one bundle, e.g. dal-exec verify run1")}
			}
			topts := bundle.TrustOptions{OwnKey: bundle.DefaultKeyPath(), TrustedKeysFile: c.String("trusted-keys")}
			opts := bundle.OpenOptions{AllowUntrusted: true}
			if p := c.String("key"); p != "" {
				pub, err := bundle.LoadPublicKey(p)
				if err != nil {
					return err
				}
				opts.TrustedKey = pub
				topts.Keys = []string{p}
			}
			trust, err := bundle.LoadTrust(topts)
			if err != nil {
				return err
			}
			opts.Trust = trust
			if s := c.String("max-extract-bytes"); s != "" {
				n, err := bundle.ParseSize(s)
				if err != nil {
					return usageError{Err: fmt.Errorf("--max-extract-bytes: %w", err)}
				}
				opts.Limits = opts.Limits.WithMaxBytes(n)
			}
			if n := c.Int("max-extract-entries"); n != 0 {
				if n < 0 {
					return usageError{Err: fmt.Errorf("--max-extract-entries %d: give a positive count", n)}
				}
				opts.Limits = opts.Limits.WithMaxEntries(n)
			}
			path := c.Args().First()
			b, err := bundle.Open(path, opts)
			if err != nil {
				if v := refusedJSON(path, err); v != nil && c.Bool("json") {
					if werr := writeJSON(c.App.Writer, v); werr != nil {
						return werr
					}
				}
				return err
			}
			defer b.Close()
			if c.Bool("json") {
				printVerified(c.App.ErrWriter, path, b, c.String("trusted-keys"))
				return writeJSON(c.App.Writer, verifiedJSON(path, b))
			}
			printVerified(c.App.Writer, path, b, c.String("trusted-keys"))
			return nil
		},
	}
}

// printVerified writes verify's report. Everything that comes from the
// bundle goes through termsafe.Line: a bundle is not trusted to print to
// the user's terminal.
func printVerified(w io.Writer, path string, b *bundle.Bundle, trustedKeys string) {
	m := b.Manifest
	st := b.ReplayStatus()
	signer := "not a key you trust: pass --key FILE, or add its public key to " + trustedKeys
	if b.Signer.Trusted {
		signer = "trusted: " + b.Signer.Source
	}
	fmt.Fprintf(w, "%s: ok — format %d, %s, signed by %s (%s), mode %s, %s (%s)\n",
		termsafe.Line(path), m.Dal.FormatVersion, plural.Count(len(m.Dal.Files), "file", "files"), b.Signer.Fingerprint, termsafe.Line(signer),
		termsafe.Line(m.Config.ExecutionMode), plural.Count(st.ReplayCount, "replay", "replays"), st.MatchStatus)
	for _, why := range m.Dal.Incomplete {
		fmt.Fprintf(w, "  incomplete: %s\n", termsafe.Line(why))
	}
	for _, u := range b.Unverified {
		fmt.Fprintf(w, "  %s: not counted: %s\n", termsafe.Line(u.File), termsafe.Line(u.Reason))
	}
	for _, warning := range b.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", termsafe.Line(warning))
	}
}
