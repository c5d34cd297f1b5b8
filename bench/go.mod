module github.com/sluicehq/sluice/bench

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/sethvargo/go-limiter v0.7.1 // indirect
	github.com/throttled/throttled/v2 v2.15.0 // indirect
	go.uber.org/ratelimit v0.3.1 // indirect
	golang.org/x/time v0.16.0 // indirect
)
