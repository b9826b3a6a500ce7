package sqlitestore

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// where builds the WHERE clause of a listing from the fields of its filter: each field
// that is set adds one condition and its arguments, and the conditions are ANDed. It is
// the one builder of every filtered query (ListAudit, ListEscalations).
type where struct {
	conds []string
	args  []any
}

// add adds cond (with its ? placeholders) and its arguments.
func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

// eq adds col = val when val is not empty.
func (w *where) eq(col, val string) {
	if val != "" {
		w.add(col+" = ?", val)
	}
}

// in adds col IN (vals…) when vals is not empty.
func (w *where) in(col string, vals []string) {
	if len(vals) == 0 {
		return
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	w.add(col+" IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")+")", args...)
}

// jsonAddress adds that the address at path (a JSON path into the column col, such as
// $.owner) is a, when a is not zero. An address is stored in its tagged-union form
// ({"kind":"human","userId":"u1"}), whose id key depends on the kind: the kind and the
// id are compared as the values they decode to, not as text.
func (w *where) jsonAddress(col, path string, a kernel.Address) error {
	if a.IsZero() {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.TrimPrefix(path, "$."), err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %w", strings.TrimPrefix(path, "$."), err)
	}
	var key string
	for k := range m {
		if k != "kind" {
			key = k
		}
	}
	w.add("json_extract("+col+", ?) = ? AND json_extract("+col+", ?) = ?",
		path+".kind", string(a.Kind), path+"."+key, a.ID)
	return nil
}

// String is " WHERE c1 AND c2 …", or "" without conditions.
func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}
