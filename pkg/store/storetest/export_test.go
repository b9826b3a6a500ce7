package storetest

import "slices"

// CheckOnly is Check of the named subtests only.
func CheckOnly(c Config, names ...string) error {
	return check(c, func(name string) bool { return slices.Contains(names, name) })
}

// SubtestNames lists the suite's subtests.
func SubtestNames() []string {
	var out []string
	for _, st := range subtests {
		out = append(out, st.name)
	}
	return out
}
