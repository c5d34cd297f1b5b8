package match_test

import (
	"fmt"

	"github.com/sluicehq/sluice/match"
)

// The gateway's matching table: exact first, then trailing "*", then the default.
func Example() {
	entries := [][]string{
		{"*", "*"},
		{"my-target", "*"},
		{"my-target", "readData"},
	}
	m, err := match.New([]string{"targetName", "toolName"}, entries)
	if err != nil {
		panic(err)
	}
	for _, v := range [][]string{
		{"my-target", "readData"},
		{"my-target", "deleteData"},
		{"other-target", "readData"},
	} {
		i, _ := m.Match(v)
		fmt.Println(v, "->", entries[i])
	}

	_, err = match.New([]string{"targetName", "toolName"}, [][]string{{"*", "readData"}})
	fmt.Println(err)
	// Output:
	// [my-target readData] -> [my-target readData]
	// [my-target deleteData] -> [my-target *]
	// [other-target readData] -> [* *]
	// invalid rate limit configuration: entries[0].dimensions.toolName: exact value "readData" after a "*": a wildcard is allowed only in trailing positions, so this entry can never match
}
