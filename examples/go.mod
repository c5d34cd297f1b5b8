module github.com/sluicehq/sluice/examples

go 1.25.0

require github.com/sluicehq/sluice v0.0.0

require golang.org/x/time v0.15.0

replace github.com/sluicehq/sluice => ../
