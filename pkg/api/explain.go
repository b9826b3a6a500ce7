package api

import "github.com/sharedos/sharedos/pkg/kernel"

// Explanation is the JSON of `explain` (spec 40 §4): the plan's diagnostic of one call
// (the kernel's dry run) with its candidates named and its fixes, built once below every
// surface that explains a call (the explain command, the scenario runner).
type Explanation struct {
	Tool         string                        `json:"tool"`
	Allowed      bool                          `json:"allowed"`
	Refusal      *Refusal                      `json:"refusal,omitempty"`
	Findings     []kernel.Finding              `json:"findings"`
	Requirement  *kernel.CapabilityRequirement `json:"requirement,omitempty"`
	MatchedGrant *kernel.CapabilityGrant       `json:"matchedGrant,omitempty"`
	Candidates   []Candidate                   `json:"candidates"`
	Fixes        []Fix                         `json:"fixes"`
	Context      kernel.AccessContext          `json:"context"`
}

// Refusal is the first refusing gate of an explanation.
type Refusal struct {
	Gate  kernel.Gate      `json:"gate"`
	Code  kernel.ErrorCode `json:"code"`
	Cause kernel.Cause     `json:"cause,omitempty"`
}

// Candidate is a grant the decision considered, and why it did not authorize the call.
type Candidate struct {
	GrantID  string `json:"grantId"`
	Rejected string `json:"rejected"`
	Reason   string `json:"reason"`
}

// Fix is one way to change the outcome: Kind is one of the Fix kinds; Namespace and
// Command go with FixEnableNamespace, Grant and YAML (the grant as a grant-file list
// item) with FixAddGrant, Message with FixArguments (and says more for the others).
type Fix struct {
	Kind      string                  `json:"kind"`
	Namespace string                  `json:"namespace,omitempty"`
	Command   string                  `json:"command,omitempty"`
	Grant     *kernel.CapabilityGrant `json:"grant,omitempty"`
	YAML      string                  `json:"yaml,omitempty"`
	Message   string                  `json:"message,omitempty"`
}

// Fix kinds.
const (
	FixEnableNamespace = "enable_namespace"
	FixAddGrant        = "add_grant"
	FixArguments       = "fix_arguments"
)
