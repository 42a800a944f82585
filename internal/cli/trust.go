package cli

import (
	"os"

	"github.com/dal-runtime/dal/bundle"
	ucli "github.com/urfave/cli/v2"
)

// Bundles a user replays, reverts or compares may come from anyone: the
// commands that read one check its signer against the keys the user
// trusts (their own key, --key, the trusted-keys file) and refuse any
// other signer unless --trust-signer names it (docs/security.md).

// trustFlags are the flags of every command that reads a bundle to act on
// it.
func trustFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringSliceFlag{Name: "key", Category: "trust",
			Usage: "also trust bundles signed by this public key (.pub; repeatable); your own key and " + bundle.DefaultTrustedKeysPath() + " are always trusted"},
		&ucli.StringSliceFlag{Name: "trust-signer", Category: "trust",
			Usage: "accept, for this command only, a bundle signed by the key with this fingerprint (as the refusal names it)"},
	}
}

// trustFromFlags loads the trust set the flags describe.
func trustFromFlags(c *ucli.Context) (*bundle.Trust, error) {
	o := bundle.DefaultTrustOptions()
	if k := os.Getenv("DAL_KEY"); k != "" {
		o.OwnKey = k // the key record signs with (--key, DAL_KEY)
	}
	o.Keys = c.StringSlice("key")
	o.Signers = c.StringSlice("trust-signer")
	t, err := bundle.LoadTrust(o)
	if err != nil {
		return nil, usageError{Err: err}
	}
	return t, nil
}

// openTrusted opens a bundle whose signer the user trusts.
func openTrusted(c *ucli.Context, path string) (*bundle.Bundle, error) {
	t, err := trustFromFlags(c)
	if err != nil {
		return nil, err
	}
	return bundle.Open(path, bundle.OpenOptions{Trust: t})
}
