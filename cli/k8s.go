package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/cluster"
)

func init() { Register("k8s", newK8sCmd) }

func newK8sCmd(env *Env) *cobra.Command {
	var (
		planArg, image, ns, claim string
		shards, parallel          int
		privileged                bool
	)
	cmd := &cobra.Command{
		Use:   "k8s --plan NAME|FILE --shards N --image IMAGE [--namespace NS] [--pvc NAME]",
		Short: "Print Kubernetes manifests running a plan's shards as an Indexed Job, and its merge Job",
		Long: `Print, as one YAML stream, the Kubernetes objects that run a plan in N shards: a
ConfigMap holding the plan, a PersistentVolumeClaim (ReadWriteMany) for /results unless
--pvc names an existing one, an Indexed Job of N pods (pod K-1 runs quicbench run --shard K/N
into /results/shard-K.db and resumes it when retried) and a merge Job, created suspended,
that joins the shards into /results/all.db once unsuspended after the shards' Job is complete
(the stream's header comment gives the kubectl commands).

The shard containers run as root with the capabilities NET_ADMIN, SYS_ADMIN and SYS_NICE and
the node's /dev/net/tun mounted, or privileged with --privileged (docs/scale.md compares the
two). The image is built by the Containerfile at the repository's root.`,
		Example: `  quicbench k8s --plan page-load-grid --shards 16 --image registry.example/quicbench:1 > qb.yaml
  kubectl apply -f qb.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if image == "" && planArg != "" {
				return Usage(errors.New("no image: give --image with the quicbench image the pods run"), "build one with the Containerfile: podman build -t IMAGE -f Containerfile .")
			}
			p, err := loadShardedPlan(env, planArg, shards)
			if err != nil {
				return err
			}
			k := cluster.K8s{Plan: safeName(p.Name), Shards: shards, Image: image, Namespace: ns, Claim: claim, Parallel: parallel, Privileged: privileged}
			y, err := k.YAML(p.YAML())
			if err != nil {
				return Usage(err, "")
			}
			_, err = env.Stdout.Write(y)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&planArg, "plan", "p", "", "built-in plan name or plan file (YAML)")
	f.IntVar(&shards, "shards", 0, "number of shards (pods of the Indexed Job)")
	f.StringVar(&image, "image", "", "container image with quicbench at "+cluster.K8sQuicbench)
	f.StringVar(&ns, "namespace", "", "namespace of the objects (default: kubectl's)")
	f.StringVar(&claim, "pvc", "", "existing ReadWriteMany PersistentVolumeClaim for /results (default: generate one)")
	f.IntVar(&parallel, "parallel", 0, "testbeds at once in each shard (quicbench run --parallel)")
	f.BoolVar(&privileged, "privileged", false, "run the shard containers privileged instead of with added capabilities")
	return cmd
}
