// Package plural counts things in English for messages a user reads: "1
// file", "3 files". It knows no grammar: the caller gives both forms.
package plural

import "strconv"

// Count is n followed by one when n is 1, else by many: Count(1, "run",
// "runs") is "1 run", Count(0, "entry", "entries") is "0 entries".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Verb is one when n is 1, else many: "was" or "were", "agrees" or
// "agree".
func Verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
