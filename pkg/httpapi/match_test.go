package httpapi

import (
	"maps"
	"strings"
	"testing"
)

// splitMatch is the route matcher as first written (split both, compare segment by
// segment): match must agree with it on every pattern and path.
func splitMatch(pattern, path string) (map[string]string, bool) {
	if !strings.Contains(pattern, "{") {
		return nil, pattern == path
	}
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range ps {
		switch {
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			if xs[i] == "" {
				return nil, false
			}
			params[p[1:len(p)-1]] = xs[i]
		case p != xs[i]:
			return nil, false
		}
	}
	return params, true
}

func TestMatchAgreesWithSplitting(t *testing.T) {
	paths := []string{"", "/", "/v1", "/v1/", "/v1/tools", "/v1/tools/", "/v1/admin/escalations/7",
		"/v1/admin/escalations/7/", "/v1/admin/escalations//resolve", "/v1/admin/escalations/7/resolve",
		"/v1/admin/escalations/7/resolve/x", "/v1/messages/abc/wait", "/v1/messages//wait", "/v1/messages/abc",
		"//", "/v1/admin/escalations/a/b", "v1/tools"}
	patterns := []string{"/v1/tools", "/v1/admin/escalations/{id}", "/v1/admin/escalations/{id}/resolve",
		"/v1/messages/{id}/wait", "/{a}/{b}", "/{a}", "{a}"}
	for i := range routes {
		patterns = append(patterns, routes[i].Path)
	}
	for _, p := range patterns {
		for _, x := range append(paths, p) {
			got, ok := match(p, x)
			want, wok := splitMatch(p, x)
			if ok != wok || !maps.Equal(got, want) {
				t.Errorf("match(%q, %q) = %v %v, want %v %v", p, x, got, ok, want, wok)
			}
		}
	}
}

// FuzzMatch: match agrees with splitting on any pattern and path.
func FuzzMatch(f *testing.F) {
	f.Add("/v1/admin/escalations/{id}/resolve", "/v1/admin/escalations/7/resolve")
	f.Add("/{a}/{b}", "/x/")
	f.Fuzz(func(t *testing.T, p, x string) {
		got, ok := match(p, x)
		want, wok := splitMatch(p, x)
		if ok != wok || !maps.Equal(got, want) {
			t.Errorf("match(%q, %q) = %v %v, want %v %v", p, x, got, ok, want, wok)
		}
	})
}
