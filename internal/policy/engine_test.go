package policy

import "github.com/dal-runtime/dal/internal/policy/rego"

// The tests compile and evaluate policies with the engine dal-exec-full
// registers.
func init() { SetEngine(rego.Engine{}) }
