module github.com/sluicehq/sluice/examples

go 1.26.0

require github.com/sluicehq/sluice v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/sluicehq/sluice => ../
