package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/peers/contract"
)

func init() { Register("contract-exec", newContractExecCmd) }

// contract-exec is the child quicbench starts, in a mount namespace of its
// own, to run a contract stack's command: it sets up the command's root
// and executes it (contract.Enter). The Spec comes in the environment.
func newContractExecCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:    "contract-exec",
		Short:  "Run a contract stack's command in its own root (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			raw := env.Getenv(contract.SpecEnv)
			if raw == "" {
				return Usage(fmt.Errorf("%s is not set", contract.SpecEnv), "quicbench starts contract-exec itself")
			}
			var spec contract.Spec
			if err := json.Unmarshal([]byte(raw), &spec); err != nil {
				return Usage(fmt.Errorf("%s: %v", contract.SpecEnv, err), "quicbench starts contract-exec itself")
			}
			return contract.Enter(spec)
		},
	}
}
