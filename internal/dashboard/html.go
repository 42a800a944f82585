package dashboard

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
)

//go:embed assets/dashboard.css
var css string

//go:embed assets/dashboard.js
var js string

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Write writes m as one self-contained HTML page: no network (not even
// live updates), nothing fetched.
func Write(w io.Writer, m *Model) error {
	m.Version, m.Live = PageVersion, false
	return writePage(w, false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(true)
		return enc.Encode(m)
	})
}

// writePage writes the page around the model JSON that data writes. The
// JSON goes in a <script type="application/json"> element with <, > and &
// escaped (encoding/json does by default), so no string of a report can
// end the element; the page's script and style are allowed by hash.
// A live page may connect to its own origin (/events), nothing else.
func writePage(w io.Writer, live bool, data func(io.Writer) error) error {
	connect := "'none'"
	if live {
		connect = "'self'"
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src %s; style-src %s; img-src 'none'; connect-src %s; font-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'">
<title>dal dashboard</title>
<style>%s</style>
</head><body>
<noscript><p>This dashboard draws its tables and plots with JavaScript, which is off. The data is in the element #dal-data as JSON.</p></noscript>
<div id="app"></div>
<script type="application/json" id="dal-data">`, cspHash(js), cspHash(css), connect, css)
	if err := data(bw); err != nil {
		return fmt.Errorf("encode the dashboard data: %w", err)
	}
	fmt.Fprintf(bw, "</script>\n<script>%s</script>\n</body></html>\n", js)
	return bw.Flush()
}
