module github.com/sluicehq/sluice/mcplimit

go 1.26.0

require github.com/sluicehq/sluice v0.2.0

require (
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

// Why replace, with go.work there: go.work builds this module against the
// repository's tree, but go mod tidy (and tidy -diff, and any GOWORK=off
// build) ignore go.work; without these lines they would look the required
// versions up in the module proxy, which holds none before the release is
// tagged and never this tree's changes since. A consumer ignores a
// dependency's replace directives and resolves the required versions;
// scripts/consumer.sh checks that it can.
replace github.com/sluicehq/sluice => ../
