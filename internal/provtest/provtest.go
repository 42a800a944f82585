// Package provtest checks a prov.json against the PROV-JSON schema of the
// W3C Member Submission, vendored here (prov-json.schema.json.SOURCE says
// where it comes from), with format assertions (uri, date-time) on. It is
// for tests only: the unit tests of package record and the end-to-end
// tests share it.
package provtest

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed prov-json.schema.json
var schemaJSON []byte

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("prov-json.schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("prov-json.schema.json")
})

// Validate reports why data is not a valid PROV-JSON document, nil when it
// is.
func Validate(data []byte) error {
	sch, err := compiled()
	if err != nil {
		return fmt.Errorf("the vendored PROV-JSON schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}
