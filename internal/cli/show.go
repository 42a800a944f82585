package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/checkpoint"
	"github.com/dal-runtime/dal/internal/show"
	"github.com/dal-runtime/dal/internal/termsafe"
	"github.com/dal-runtime/dal/internal/version"
	ucli "github.com/urfave/cli/v2"
)

// ShowCommand is `dal-exec show`.
func ShowCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "show",
		Usage:     "write a self-contained HTML trace viewer of a bundle, or of two side by side",
		ArgsUsage: "BUNDLE [BUNDLE_B]",
		Description: `Verifies the bundle (signature and every hash: a tampered or unsigned bundle is
refused) and writes one HTML file that shows the run: a timeline of its process streams, LLM
calls (prompt and response as a chat, streamed chunks), HTTP exchanges, execs and crossings,
iterations and checkpoints; file changes as unified diffs; stdout and stderr; the latest replay
verdict with its first divergence marked in place; boundary coverage and escapes. With two
bundles the page also aligns their timelines, pairs their LLM calls message by message and
lists the file changes that differ.

The file needs nothing else: no network, no external asset; open it from disk in any browser.
A bundle signed by a key you do not trust is shown, with a warning at the top of the page.
Very long logs and bodies are cut in the page (the bundle holds them whole); the page says
where. show reads at most --max-load-bytes of network.har, of each other JSON file and of
prompts/ together, and the page says what it left out. See docs/show.md.

Without --out the page goes to dal's cache ($XDG_CACHE_HOME/dal/show, by default
~/.cache/dal/show), never into the current directory, which is often an agent's workspace;
dal-exec prints its path.

Examples:
   dal-exec show run1                      # writes ~/.cache/dal/show/run1-<hash>.html
   dal-exec show --out /tmp/run1.html --open run1.tar.zst
   dal-exec show run-seed7 run-seed8       # writes .../run-seed7-vs-run-seed8-<hash>.html`,
		Flags: append(trustFlags(),
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, EnvVars: []string{"DAL_SHOW_OUT"},
				Usage: "the HTML file to write (default: BUNDLE-<hash>.html, or A-vs-B-<hash>.html, in ~/.cache/dal/show)"},
			&ucli.StringFlag{Name: "max-load-bytes", Value: "128MiB", EnvVars: []string{"DAL_SHOW_MAX_LOAD_BYTES"},
				Usage: "the most the page reads of network.har, of each other JSON file, and of prompts/ together (e.g. 1GiB); what lies beyond is left out with a notice"},
			&ucli.BoolFlag{Name: "open", Usage: "open the page in a browser (xdg-open) once written"},
			cpStoreFlag("checkpoint-store"),
		),
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 && c.NArg() != 2 {
				return usageError{Err: fmt.Errorf("show takes one bundle, or two to compare, e.g. dal-exec show run1 or dal-exec show run1 run2")}
			}
			paths := c.Args().Slice()
			out := c.String("out")
			if out == "" {
				var err error
				if out, err = defaultShowPath(paths); err != nil {
					return err
				}
			}
			n, err := bundle.ParseSize(c.String("max-load-bytes"))
			if err != nil || n == 0 {
				return usageError{Err: fmt.Errorf("--max-load-bytes %q is not a positive size: give one like 512MiB", c.String("max-load-bytes"))}
			}
			lim := show.DefaultLimits
			lim.HARBytes, lim.JSONBytes, lim.PromptsBytes = n, n, n
			if err := checkShowOut(out); err != nil {
				return err
			}
			t, err := trustFromFlags(c)
			if err != nil {
				return err
			}
			page := &show.Page{GeneratedBy: "dal " + version.Version}
			var opened []*bundle.Bundle
			defer func() {
				for _, b := range opened {
					b.Close()
				}
			}()
			for _, p := range paths {
				b, err := bundle.Open(p, bundle.OpenOptions{Trust: t, AllowUntrusted: true})
				if err != nil {
					return err
				}
				opened = append(opened, b)
				if !b.Signer.Trusted {
					fmt.Fprintf(c.App.ErrWriter, "dal: %s is signed by %s, a key you do not trust: the page shows it with a warning\n",
						termsafe.Line(p), b.Signer.Fingerprint)
				}
				v := show.Load(b, p, lim)
				v.Checkpoints = bundleCheckpoints(c.String("checkpoint-store"), p)
				page.Runs = append(page.Runs, v)
			}
			if len(opened) == 2 {
				page.Compare = show.Compare(opened[0], opened[1], page.Runs[0], page.Runs[1], lim)
			}
			if err := atomicfile.Write(out, 0o644, func(w io.Writer) error { return show.Write(w, page) }); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			fmt.Fprintf(c.App.ErrWriter, "dal: wrote %s\n", termsafe.Line(out))
			if c.Bool("open") {
				openInBrowser(c.App.ErrWriter, out)
			}
			return nil
		},
	}
}

// defaultShowName is BUNDLE-<hash>.html, or A-vs-B-<hash>.html: the
// bundles' base names without an archive extension, and a short hash of
// their absolute paths, so that two bundles named alike in two places get
// two pages.
func defaultShowName(paths []string) string {
	var names []string
	h := sha256.New()
	for _, p := range paths {
		n := filepath.Base(strings.TrimRight(p, "/"))
		for _, ext := range []string{".tar.zst", ".tar.gz", ".tgz"} {
			n = strings.TrimSuffix(n, ext)
		}
		names = append(names, n)
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = p
		}
		h.Write([]byte(abs + "\x00"))
	}
	return strings.Join(names, "-vs-") + "-" + hex.EncodeToString(h.Sum(nil))[:8] + ".html"
}

// defaultShowPath is where a page goes without --out: dal's cache
// directory for pages ($XDG_CACHE_HOME/dal/show, created private), never
// the current directory, which is often an agent's workspace, where the
// next record would capture the page.
func defaultShowPath(paths []string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", usageError{Err: fmt.Errorf("no cache directory for the page (%v): pass --out FILE.html", err)}
	}
	dir := filepath.Join(cache, "dal", "show")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s for the page (%w): pass --out FILE.html", dir, err)
	}
	return filepath.Join(dir, defaultShowName(paths)), nil
}

// checkShowOut refuses an --out that cannot be written before any work
// is done: its directory must exist, and it must not be a directory.
func checkShowOut(out string) error {
	dir := filepath.Dir(out)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageError{Err: fmt.Errorf("--out %s: the directory %s does not exist: create it or choose another --out", out, dir)}
	case err != nil:
		return usageError{Err: fmt.Errorf("--out %s: %v", out, err)}
	case !fi.IsDir():
		return usageError{Err: fmt.Errorf("--out %s: %s is not a directory: choose another --out", out, dir)}
	}
	if fi, err := os.Lstat(out); err == nil && fi.IsDir() {
		return usageError{Err: fmt.Errorf("--out %s is a directory: name an .html file", out)}
	}
	return nil
}

// bundleCheckpoints lists the checkpoints the local store holds of runs
// recorded into the bundle at path; none when the store has none or
// cannot be read (a page without checkpoints is still a page).
func bundleCheckpoints(storeDir, path string) []show.Checkpoint {
	out := []show.Checkpoint{}
	abs, err := filepath.Abs(path)
	if err != nil {
		return out
	}
	s, err := checkpoint.Open(storeDir)
	if err != nil {
		return out
	}
	cs, _ := s.List(checkpoint.Filter{})
	for i := len(cs) - 1; i >= 0; i-- { // oldest first
		x := cs[i]
		if x.Run.Bundle != abs {
			continue
		}
		out = append(out, show.Checkpoint{ID: x.ID, Name: x.Name, Tag: x.Tag, Note: x.Note, AtNS: x.AtNS,
			Files: len(x.Artifacts), Bytes: x.ArtifactBytes()})
	}
	return out
}

// openInBrowser starts xdg-open on page, or says where the page is.
func openInBrowser(w io.Writer, page string) {
	abs, err := filepath.Abs(page)
	if err != nil {
		abs = page
	}
	opener, err := exec.LookPath("xdg-open")
	if err != nil {
		fmt.Fprintf(w, "dal: no xdg-open here: open file://%s in a browser\n", termsafe.Line(abs))
		return
	}
	cmd := exec.Command(opener, abs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(w, "dal: xdg-open failed (%v): open file://%s in a browser\n", err, termsafe.Line(abs))
		return
	}
	cmd.Process.Release() // xdg-open hands the page to the browser and exits on its own
}
