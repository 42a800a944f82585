// Package show turns one bundle, or two, into a self-contained HTML trace
// viewer (`dal-exec show`, docs/show.md). It reads a verified
// *bundle.Bundle into a View (Load), pairs two of them (Compare) and writes
// one HTML file (Write) that needs nothing else: no network, no external
// asset, opened from file://.
//
// It is not a verifier and not a diff engine for replay: bundle.Open has
// checked the signature and every hash before Load runs, and the replay
// verdicts shown are the bundle's own signed outcomes.
//
// # A bundle is hostile
//
// Everything Load reads goes through the bundle's safefs root
// (Bundle.OpenFile and friends: no symbolic link is followed). Strings from
// the bundle reach the page only as JSON inside
// <script type="application/json">, which encoding/json escapes (<, >, &,
// U+2028, U+2029 become \u sequences), so no bundle text can close the
// element; the page's script puts them into the DOM with textContent,
// never as markup. A Content-Security-Policy allows only the page's own
// script and style (by hash) and no network, images or frames, as a second
// wall. Redacted values stay "[REDACTED]": the viewer only marks them.
//
// # Size
//
// A run may hold 10,000 HTTP exchanges and 100 MB of logs. The page embeds
// what is needed to show it, bounded (Limits): each log's head and tail,
// each body up to a size and all bodies up to a budget, diffs of text files
// up to a size; what is left out is said in the page with the bundle file
// to read. The page renders lists virtually (only the visible rows exist in
// the DOM) and a detail only when it is opened.
package show
