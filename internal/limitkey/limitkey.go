// Package limitkey is the one escaping of the names users see for limits
// and buckets: Decision.LimitKey, Decision.Shadowed and Decision.Evaluated
// (the format is documented in package stack, "Names of limits and
// buckets").
package limitkey

// Separators: of a limit key, '/' after the id, ',' between dimensions
// (and between an Evaluated entry's values), '=' between a dimension's name
// and value; of an Evaluated entry, ':' between the id, the metric and the
// values. Escape is the escape character itself.
const (
	SepID    = '/'
	SepDim   = ','
	SepValue = '='
	SepField = ':'
	Escape   = '%'
)

// AppendEscaped appends s to b with the separators and the escape
// character percent-encoded (',' %2C, '=' %3D, '/' %2F, ':' %3A, '%' %25);
// every other byte is kept as is, so plain names and values render
// unchanged and no escaped string contains a separator.
func AppendEscaped(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case SepDim, SepValue, SepID, SepField, Escape:
			b = append(b, Escape, hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}
