package har

import (
	"encoding/json"
	"testing"
)

// TestUnquoteJSONAsEncodingJSON: unquoteJSON's shortcut for strings
// without escapes reads every literal as encoding/json does, and fails
// where it fails.
func TestUnquoteJSONAsEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`""`, `"plain"`, `"sk-abc123"`, `"é ü 日本"`, `"a\"b"`, `"a\\b"`, `"\u00e9"`, `"\n"`,
		"\"tab\there\"", "\"nl\nhere\"", "\"\xff\xfe bad utf-8\"", `"unterminated`, `"a"b"`, `"`, `x`, `"\"`,
	} {
		var want string
		err := json.Unmarshal([]byte(lit), &want)
		got, ok := unquoteJSON([]byte(lit))
		if ok != (err == nil) || got != want {
			t.Errorf("unquoteJSON(%q) = %q, %v; encoding/json: %q, %v", lit, got, ok, want, err)
		}
	}
}
