package cmd

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/client"
)

// RemoteOptions are the global flags that run a command against a remote `sharedos
// serve` instead of the embedded host.
type RemoteOptions struct {
	// Server is the server's URL ("" : the embedded host).
	Server string
	// TokenEnv names the environment variable that holds the bearer token.
	TokenEnv string
}

// DefaultTokenEnv is the variable --token-env names by default.
const DefaultTokenEnv = "SHAREDOS_TOKEN"

func (r *RemoteOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&r.Server, "server", "", "run against a remote 'sharedos serve' at this URL instead of the embedded host")
	fs.StringVar(&r.TokenEnv, "token-env", DefaultTokenEnv, "environment variable holding the bearer token of --server")
}

// remote returns the backend of --server (ok false without it): the typed client of the
// server's /v1 API under the token of the --token-env variable. The context is the
// token's (the server decides it); --call-id and --trace name the call as they do
// embedded. Every command that obtains its backend through the factory's service runs
// remotely this way, with the same output and exit codes.
func (f *Factory) remote() (svc api.Service, ok bool, err error) {
	r := f.Global.RemoteOptions
	if r.Server == "" {
		return nil, false, nil
	}
	if r.TokenEnv == "" || strings.ContainsAny(r.TokenEnv, "= \t") {
		return nil, true, usageError("pass --token-env NAME, the environment variable that holds the token", "invalid --token-env %q", r.TokenEnv)
	}
	token := f.Env(r.TokenEnv)
	if token == "" {
		return nil, true, usageError("set "+r.TokenEnv+" to a token of the server's tokens file ('sharedos tokens create' mints one)",
			"--server needs a bearer token: %s is not set", r.TokenEnv)
	}
	c, err := client.New(r.Server, token, client.Options{Clock: f.Clock, CallID: f.Global.CallID, TraceID: f.Global.Trace})
	if err != nil {
		return nil, true, usageError("pass --server http://HOST:PORT (or https://)", "%v", err)
	}
	return c, true, nil
}
