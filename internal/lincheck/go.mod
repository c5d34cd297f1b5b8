module github.com/sluicehq/sluice/internal/lincheck

go 1.26.0

require (
	github.com/sluicehq/sluice v0.0.0
	golang.org/x/time v0.16.0
)

require github.com/anishathalye/porcupine v1.3.1

replace github.com/sluicehq/sluice => ../..

replace github.com/sluicehq/sluice/stack/redisbackend => ../../stack/redisbackend
