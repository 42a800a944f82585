package cli

import (
	"fmt"

	"github.com/dal-runtime/dal/bundle"
	ucli "github.com/urfave/cli/v2"
)

// KeygenCommand is `dal-exec keygen`.
func KeygenCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "keygen",
		Usage: "create the ed25519 key that signs bundles",
		Description: `Writes a private key (mode 0600) and its public key beside it (.pub). record creates one on
first use when none exists; keygen makes one deliberately, or a second one elsewhere.

Examples:
   dal-exec keygen
   dal-exec keygen --key ./ci-signing.key`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "key", EnvVars: []string{"DAL_KEY"}, Usage: "where to write the key (default: ~/.config/dal/signing.key)"},
			&ucli.BoolFlag{Name: "force", Usage: "replace an existing key (bundles it signed stay verifiable by their embedded public key)"},
		},
		Action: func(c *ucli.Context) error {
			path := c.String("key")
			if path == "" {
				path = bundle.DefaultKeyPath()
			}
			pub, err := bundle.GenerateKey(path, c.Bool("force"))
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote %s and %s (public key %s)\n", path, bundle.PublicKeyPath(path), bundle.EncodePublicKey(pub))
			return nil
		},
	}
}
