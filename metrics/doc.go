// Package metrics will hold dald's Prometheus registry (DESIGN §10). It is
// empty until the boundary-coverage and metrics issue lands; dald serves no
// /metrics yet.
package metrics
