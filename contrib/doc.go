// Package contrib holds no code. Its directories carry files for running
// dal alongside other software (systemd units, Prometheus configuration);
// the package exists so that go test checks them.
package contrib
