package consistency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/dal-runtime/dal/internal/digest"
)

// AnswerSource says what a run's answer is, the thing runs vote on. The
// zero value is the run's standard output.
type AnswerSource struct {
	// Command is a shell command (sh -c) that prints the run's answer; it
	// runs with the DAL_RUN_* variables of Options.Verify.
	Command string `json:"command,omitempty"`
	// File is a file, relative to the workspace, that the agent writes its
	// answer to; it is read from the run's bundle.
	File string `json:"file,omitempty"`
	// JSON is a path ($.final.answer, $.choices[0].text) into the JSON of
	// standard output, of File or of Command's output.
	JSON string `json:"json,omitempty"`
}

// String names the source for a person: "stdout", "file out.txt at $.a".
func (a AnswerSource) String() string {
	var s string
	switch {
	case a.Command != "":
		s = fmt.Sprintf("the output of %q", a.Command)
	case a.File != "":
		s = "the file " + a.File
	default:
		s = "stdout"
	}
	if a.JSON != "" {
		s += " at " + a.JSON
	}
	return s
}

// Check reports a source that cannot work, before any run.
func (a AnswerSource) Check() error {
	if a.Command != "" && a.File != "" {
		return errors.New("give either --answer (a command) or --answer-file, not both")
	}
	if a.File != "" {
		if _, err := workspaceRel(a.File); err != nil {
			return fmt.Errorf("--answer-file: %w", err)
		}
	}
	if a.JSON != "" {
		if _, err := parseJSONPath(a.JSON); err != nil {
			return fmt.Errorf("--answer-json: %w", err)
		}
	}
	return nil
}

// answerShown is how many characters of an answer a report keeps.
const answerShown = 200

// answer is what a run answered: the text (surrounding white space
// removed) and its hash, which is what runs vote on.
type answer struct {
	text, hash string
}

func newAnswer(text string) answer {
	text = strings.TrimSpace(text)
	return answer{text: text, hash: digest.Bytes([]byte(text))}
}

// answerOf reads run's answer from its bundle's files (or the answer
// command). A run without an answer fails; the error says why, for a
// warning.
func (o *Options) answerOf(ctx context.Context, files runFiles, env []string) (answer, error) {
	src := o.Answer
	var raw []byte
	switch {
	case src.Command != "":
		out, err := shell(ctx, src.Command, env)
		if err != nil {
			return answer{}, fmt.Errorf("the answer command failed (%v)", err)
		}
		raw = out
	case src.File != "":
		rel, err := workspaceRel(src.File)
		if err != nil {
			return answer{}, err
		}
		b, err := files("fs-diff/files/" + filepath.ToSlash(rel))
		if errors.Is(err, fs.ErrNotExist) {
			return answer{}, fmt.Errorf("the agent did not write the answer file %s", src.File)
		}
		if err != nil {
			return answer{}, err
		}
		raw = b
	default:
		b, err := files("logs/stdout")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return answer{}, err
		}
		raw = b
	}
	if src.JSON == "" {
		return newAnswer(string(raw)), nil
	}
	path, err := parseJSONPath(src.JSON)
	if err != nil {
		return answer{}, err
	}
	text, err := path.find(raw)
	if err != nil {
		return answer{}, fmt.Errorf("%s: %w", src, err)
	}
	return newAnswer(text), nil
}

// workspaceRel checks that rel names a file inside the workspace and
// returns it cleaned.
func workspaceRel(rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is not a file inside the workspace: give a path relative to it", rel)
	}
	return clean, nil
}

// shorten keeps the first n characters of s on one line, marking a cut
// with "…".
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// shortHash is the first 12 hex digits of a "sha256:" hash.
func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// decodeJSON reads the JSON document of data; when data is not one
// document (logs before it), the last line that is one.
func decodeJSON(data []byte) (any, error) {
	if v, err := decodeOne(data); err == nil {
		return v, nil
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if len(bytes.TrimSpace(lines[i])) == 0 {
			continue
		}
		if v, err := decodeOne(lines[i]); err == nil {
			return v, nil
		}
		break
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("there is no JSON: the text is empty")
	}
	return nil, errors.New("the text is not JSON, nor is its last line")
}

func decodeOne(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var more any
	if err := d.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}
