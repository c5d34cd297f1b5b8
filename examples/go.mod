module github.com/sluicehq/sluice/examples

go 1.26.0

require github.com/sluicehq/sluice v0.0.0

require golang.org/x/time v0.16.0 // indirect

replace github.com/sluicehq/sluice => ../
