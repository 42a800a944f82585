package cli

import (
	"fmt"

	"github.com/dal-runtime/dal/bundle"
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

Examples:
   dal-exec verify run1
   dal-exec verify --key ~/.config/dal/signing.key.pub run1.tar.zst`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "key", Usage: "require the bundle to be signed by this public key (.pub)"},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageError{fmt.Errorf("verify takes one bundle, e.g. dal-exec verify run1")}
			}
			var opts bundle.OpenOptions
			if p := c.String("key"); p != "" {
				pub, err := bundle.LoadPublicKey(p)
				if err != nil {
					return err
				}
				opts.TrustedKey = pub
			}
			b, err := bundle.Open(c.Args().First(), opts)
			if err != nil {
				return err
			}
			defer b.Close()
			m := b.Manifest
			st := b.ReplayStatus()
			fmt.Fprintf(c.App.Writer, "%s: ok — format %d, %d files, signed by %s, mode %s, %d replays (%s)\n",
				c.Args().First(), m.Dal.FormatVersion, len(m.Dal.Files), m.Dal.PublicKey, m.Config.ExecutionMode, st.ReplayCount, st.MatchStatus)
			return nil
		},
	}
}
