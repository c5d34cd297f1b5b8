// Package examples holds runnable sluice programs, one folder each; run one
// with `go run ./examples/<name>` from the repository root.
package examples
