package cmd

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is the output of `version`.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCmd(f *Factory) *cobra.Command {
	return markPrintsOnly(&cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Example: `  sharedos version
  sharedos version -o json`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			p, err := f.standalonePrinter()
			if err != nil {
				return err
			}
			v := buildVersion()
			if p.format != FormatTable {
				return p.data(v)
			}
			p.line("sharedos %s (commit %s, %s, %s)", v.Version, v.Commit, v.GoVersion, v.Platform)
			return nil
		},
	})
}

// buildVersion reads the module version and VCS revision the Go toolchain stamped
// (builds with -buildvcs=false have no revision: "unknown").
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Commit: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && v.Commit != "unknown" {
		v.Commit += "-dirty"
	}
	return v
}
