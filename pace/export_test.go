package pace

// Upstreams reports how many upstream keys t keeps state for.
func Upstreams(t *Transport) int { return t.ups.len() }
