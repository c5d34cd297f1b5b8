package sluice

import "iter"

// inlineKeys is how many dimensions a Keys holds without allocating. A
// request usually resolves to a handful (target, tool, caller, model, action).
const inlineKeys = 6

// KV is one resolved dimension: its name (a dimension key such as
// "targetName" or "$.context.jwt.sub") and the request's value for it.
type KV struct {
	Name  string
	Value string
}

// Keys is the set of dimension values one request resolved to: ordered
// name → value pairs, looked up by name. Setting a name that is already present
// replaces its value.
//
// Keys is a value type. Up to six pairs are stored inline, so building a Keys
// and passing it to Limiter.Allow does not allocate; more pairs spill into a
// slice. The zero Keys is empty and ready to use.
//
//	keys := sluice.NewKeys("targetName", "my-target", "toolName", "readData")
//	keys.Set("caller", callerID)
type Keys struct {
	n      int
	inline [inlineKeys]KV
	more   []KV
}

// NewKeys builds Keys from alternating names and values:
// NewKeys("targetName", "t1", "toolName", "readData"). A trailing name without a
// value is given the empty value. It does not allocate for up to six pairs.
func NewKeys(nameValues ...string) (k Keys) {
	if len(nameValues) == 2 { // one pair, the commonest: nothing to replace
		k.n, k.inline[0] = 1, KV{nameValues[0], nameValues[1]}
		return k
	}
	for i := 0; i < len(nameValues); i += 2 {
		v := ""
		if i+1 < len(nameValues) {
			v = nameValues[i+1]
		}
		k.Set(nameValues[i], v)
	}
	return k
}

// Set sets name to value, replacing an earlier value for the same name and
// keeping its position; a new name is appended.
func (k *Keys) Set(name, value string) {
	for i := 0; i < k.n; i++ {
		if kv := k.ptr(i); kv.Name == name {
			kv.Value = value
			return
		}
	}
	if k.n < inlineKeys {
		k.inline[k.n] = KV{name, value}
	} else {
		k.more = append(k.more, KV{name, value})
	}
	k.n++
}

// With returns a copy of k with name set to value.
func (k Keys) With(name, value string) Keys {
	if k.n >= inlineKeys {
		// Copy the spill slice so the copy and k never share storage.
		k.more = append([]KV(nil), k.more...)
	}
	k.Set(name, value)
	return k
}

// Get returns the value for name and whether it is present.
func (k *Keys) Get(name string) (string, bool) {
	for i := 0; i < k.n; i++ {
		if kv := k.ptr(i); kv.Name == name {
			return kv.Value, true
		}
	}
	return "", false
}

// Len returns the number of pairs.
func (k *Keys) Len() int { return k.n }

// At returns the i-th pair in insertion order. It panics if i is out of range,
// like a slice index.
func (k *Keys) At(i int) KV {
	if i < 0 || i >= k.n {
		panic("sluice: Keys.At index out of range")
	}
	return *k.ptr(i)
}

// All iterates over the pairs in insertion order.
func (k *Keys) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i < k.n; i++ {
			kv := k.ptr(i)
			if !yield(kv.Name, kv.Value) {
				return
			}
		}
	}
}

// String renders the pairs as "name=value,name=value" for logs and tests.
func (k Keys) String() string {
	var b []byte
	for i := 0; i < k.n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		kv := k.ptr(i)
		b = append(b, kv.Name...)
		b = append(b, '=')
		b = append(b, kv.Value...)
	}
	return string(b)
}

func (k *Keys) ptr(i int) *KV {
	if i < inlineKeys {
		return &k.inline[i]
	}
	return &k.more[i-inlineKeys]
}
