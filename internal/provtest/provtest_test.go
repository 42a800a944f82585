package provtest

import "testing"

// The check is real: a minimal document validates, one whose relation
// names its activity with a number does not.
func TestValidate(t *testing.T) {
	good := `{"prefix": {"dal": "https://example.com/dal#"}, "activity": {"dal:run": {}}, "wasAssociatedWith": {"_:a": {"prov:activity": "dal:run"}}}`
	bad := `{"prefix": {"dal": "https://example.com/dal#"}, "activity": {"dal:run": {}}, "wasAssociatedWith": {"_:a": {"prov:activity": 7}}}`
	if err := Validate([]byte(good)); err != nil {
		t.Errorf("a valid document: %v", err)
	}
	if err := Validate([]byte(bad)); err == nil {
		t.Errorf("an invalid document validates")
	}
	if err := Validate([]byte("{")); err == nil {
		t.Errorf("a truncated document validates")
	}
}
