module github.com/sluicehq/sluice/bench

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
)

require (
	github.com/sethvargo/go-limiter v0.7.1
	github.com/sluicehq/sluice v0.0.0
	github.com/throttled/throttled/v2 v2.15.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/time v0.16.0
)

replace github.com/sluicehq/sluice => ../
