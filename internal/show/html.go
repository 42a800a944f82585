package show

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
)

//go:embed assets/show.css
var css string

//go:embed assets/show.js
var js string

// cspHash is a Content-Security-Policy source for an inline element
// whose text is s.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Write writes p as one self-contained HTML page to w. The data goes in
// a <script type="application/json"> element, JSON-encoded with <, > and
// & escaped, so no string of a bundle can end the element or become
// markup; the page's own script and style are allowed by hash, nothing
// else (no network, images, frames or other scripts).
func Write(w io.Writer, p *Page) error {
	p.Version = PageVersion
	title := "dal show"
	for i, r := range p.Runs {
		sep := " — "
		if i > 0 {
			sep = " vs "
		}
		title += sep + r.Name
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src %s; style-src %s; img-src 'none'; connect-src 'none'; font-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'">
<meta name="generator" content="%s">
<title>%s</title>
<style>%s</style>
</head><body>
<noscript><p>This page shows a dal bundle with JavaScript, which is off. The data is in the element #dal-data as JSON.</p></noscript>
<div id="app"></div>
<script type="application/json" id="dal-data">`,
		cspHash(js), cspHash(css), html.EscapeString(p.GeneratedBy), html.EscapeString(title), css)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(true) // <, >, & as \u003c, \u003e, \u0026: no "</script>" can appear
	if err := enc.Encode(p); err != nil {
		return fmt.Errorf("encode the page data: %w", err)
	}
	fmt.Fprintf(bw, "</script>\n<script>%s</script>\n</body></html>\n", js)
	return bw.Flush()
}
