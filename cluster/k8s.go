package cluster

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Paths inside the Kubernetes pods.
const (
	K8sPlanDir    = "/plan"    // the plan's ConfigMap, mounted read-only
	K8sResultsDir = "/results" // the shared results volume (the claim)
	K8sTUN        = "/dev/net/tun"
	// K8sQuicbench is the binary in the image the Containerfile builds.
	K8sQuicbench = "/usr/local/bin/quicbench"
)

// Retry limits of the shards' Indexed Job.
const (
	// K8sRetriesPerIndex is the backoffLimitPerIndex: how often one
	// shard's pod is retried (each retry resumes its database).
	K8sRetriesPerIndex = 3
	// K8sClaimSize is the storage requested by the generated claim.
	K8sClaimSize = "10Gi"
)

// K8s describes the Kubernetes objects of one sharded plan.
type K8s struct {
	// Plan is the plan's name; the objects are named qb-PLAN-...
	Plan string
	// Shards is the number of shards: completions and parallelism.
	Shards int
	// Image is the container image holding quicbench (see Containerfile).
	Image string
	// Namespace of every object ("" leaves it to kubectl's context).
	Namespace string
	// Claim names an existing PersistentVolumeClaim (ReadWriteMany) for
	// the results; "" generates one, qb-PLAN-results.
	Claim string
	// Parallel is passed as --parallel to every shard's run (0: none).
	Parallel int
	// Privileged runs the shard containers privileged instead of with
	// the capabilities NET_ADMIN, SYS_ADMIN and SYS_NICE.
	Privileged bool
}

// base is the prefix of the objects' names: qb-PLAN as a DNS label short
// enough for the suffixes and the pods' generated names.
func (k K8s) base() string { return dnsLabel("qb-"+k.Plan, 40) }

// ConfigMapName returns the name of the plan's ConfigMap (qb-PLAN-plan).
func (k K8s) ConfigMapName() string { return k.base() + "-plan" }

// JobName returns the name of the shards' Indexed Job (qb-PLAN-shards).
func (k K8s) JobName() string { return k.base() + "-shards" }

// MergeJobName returns the name of the merge Job (qb-PLAN-merge).
func (k K8s) MergeJobName() string { return k.base() + "-merge" }

// ClaimName returns the name of the results claim: Claim, or the
// generated qb-PLAN-results.
func (k K8s) ClaimName() string {
	if k.Claim != "" {
		return k.Claim
	}
	return k.base() + "-results"
}

// dnsLabel makes s a DNS-1123 label of at most max characters.
func dnsLabel(s string, max int) string {
	s = nonDNS.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > max {
		s = s[:max]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		return "qb"
	}
	return s
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Validate checks the description.
func (k K8s) Validate() error {
	if k.Shards < 1 || k.Shards > MaxShards {
		return fmt.Errorf("%d shards: want 1..%d", k.Shards, MaxShards)
	}
	if k.Parallel < 0 {
		return fmt.Errorf("parallel %d: want 0 (none) or more", k.Parallel)
	}
	if k.Image == "" || strings.ContainsAny(k.Image, " \t\n") {
		return fmt.Errorf("image %q: want an image reference such as registry.example/quicbench:1.0", k.Image)
	}
	if k.Namespace != "" && (len(k.Namespace) > 63 || !dnsName.MatchString(k.Namespace) || strings.Contains(k.Namespace, ".")) {
		return fmt.Errorf("namespace %q is not a DNS-1123 label", k.Namespace)
	}
	if k.Claim != "" && (len(k.Claim) > 253 || !dnsName.MatchString(k.Claim)) {
		return fmt.Errorf("claim %q is not a DNS-1123 name", k.Claim)
	}
	return nil
}

func (k K8s) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: k.Namespace,
		Labels: map[string]string{
			"app.kubernetes.io/name":      "quicbench",
			"app.kubernetes.io/instance":  k.base(),
			"app.kubernetes.io/component": component,
		},
	}
}

// ShardScript is the shard container's shell script: shard K is
// JOB_COMPLETION_INDEX+1 (set by Kubernetes in an Indexed Job's pods); a
// retried pod finds its database on the results volume and resumes it, and
// a shard whose run ended well is marked done (/results/shard-K.done), so
// that the Job applied again does not take it again.
func (k K8s) ShardScript() string {
	extra := " --no-report --lines"
	if k.Parallel > 0 {
		extra += fmt.Sprintf(" --parallel %d", k.Parallel)
	}
	return strings.Join([]string{
		"set -eu",
		`k=$((JOB_COMPLETION_INDEX + 1))`,
		`db="` + K8sResultsDir + `/shard-$k.db"`,
		`mark="` + K8sResultsDir + `/shard-$k.done"`,
		`if [ -e "$mark" ]; then echo "shard $k is complete: nothing to do"; exit 0; fi`,
		`if [ -e "$db" ]; then`,
		`  ` + K8sQuicbench + ` run --resume "$db"` + extra,
		`else`,
		`  ` + K8sQuicbench + ` run --plan ` + K8sPlanDir + "/" + PlanFile + ` --shard "$k/$SHARDS" -o "$db"` + extra,
		`fi`,
		`touch "$mark"`,
	}, "\n") + "\n"
}

// MergeScript is the merge container's shell script.
func (k K8s) MergeScript() string {
	// quicbench merge never overwrites: a retried merge replaces what the
	// last attempt wrote.
	return "rm -f " + K8sResultsDir + "/" + MergedFile + "\n" +
		"exec " + K8sQuicbench + " merge " + K8sResultsDir + "/shard-*.db -o " + K8sResultsDir + "/" + MergedFile + "\n"
}

// Objects returns the objects in the order they are applied: the plan's
// ConfigMap, the results claim (unless Claim names an existing one), the
// shards' Indexed Job and the merge Job, created suspended (unsuspend it
// once the shards' Job is complete).
func (k K8s) Objects(planYAML []byte) ([]any, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	var objs []any
	objs = append(objs, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: k.meta(k.ConfigMapName(), "plan"),
		Data:       map[string]string{PlanFile: string(planYAML)},
	})
	if k.Claim == "" {
		objs = append(objs, &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: k.meta(k.ClaimName(), "results"),
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(K8sClaimSize)},
				},
			},
		})
	}
	results := corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: k.ClaimName()},
	}}
	resultsMount := corev1.VolumeMount{Name: "results", MountPath: K8sResultsDir}

	sc := &corev1.SecurityContext{
		RunAsUser: ptr[int64](0),
		Capabilities: &corev1.Capabilities{
			Add: []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "SYS_NICE"},
		},
	}
	charDev := corev1.HostPathCharDev
	volumes := []corev1.Volume{
		{Name: "plan", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: k.ConfigMapName()},
		}}},
		results,
	}
	mounts := []corev1.VolumeMount{{Name: "plan", MountPath: K8sPlanDir, ReadOnly: true}, resultsMount}
	if k.Privileged {
		// A privileged container sees the host's devices, TUN included.
		sc = &corev1.SecurityContext{RunAsUser: ptr[int64](0), Privileged: ptr(true)}
	} else {
		volumes = append(volumes, corev1.Volume{Name: "tun", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: K8sTUN, Type: &charDev},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "tun", MountPath: K8sTUN})
	}
	n := int32(k.Shards)
	indexed := batchv1.IndexedCompletion
	objs = append(objs, &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: k.meta(k.JobName(), "shards"),
		Spec: batchv1.JobSpec{
			CompletionMode:       &indexed,
			Completions:          &n,
			Parallelism:          &n,
			BackoffLimitPerIndex: ptr[int32](K8sRetriesPerIndex),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					// Bad input or a machine that cannot run it (quicbench's
					// exit codes 2 and 3): a retry would fail the same way.
					Action: batchv1.PodFailurePolicyActionFailIndex,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: ptr("shard"),
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{2, 3},
					},
				},
				{
					// Eviction, preemption, node drain: retry without counting it.
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
						{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
					},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: k.meta("", "shards").Labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:            "shard",
						Image:           k.Image,
						Command:         []string{"sh", "-c", k.ShardScript()},
						Env:             []corev1.EnvVar{{Name: "SHARDS", Value: fmt.Sprint(k.Shards)}},
						VolumeMounts:    mounts,
						SecurityContext: sc,
					}},
					Volumes: volumes,
				},
			},
		},
	})
	objs = append(objs, &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: k.meta(k.MergeJobName(), "merge"),
		Spec: batchv1.JobSpec{
			Suspend:      ptr(true),
			BackoffLimit: ptr[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: k.meta("", "merge").Labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:         "merge",
						Image:        k.Image,
						Command:      []string{"sh", "-c", k.MergeScript()},
						VolumeMounts: []corev1.VolumeMount{resultsMount},
					}},
					Volumes: []corev1.Volume{results},
				},
			},
		},
	})
	return objs, nil
}

// YAML returns the objects as one multi-document YAML stream, with a
// comment saying how to apply it.
func (k K8s) YAML(planYAML []byte) ([]byte, error) {
	objs, err := k.Objects(planYAML)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	ns := ""
	if k.Namespace != "" {
		ns = " -n " + k.Namespace
	}
	fmt.Fprintf(&b, `# quicbench plan %s in %d shards: generated by quicbench k8s (docs/scale.md).
#
# kubectl apply%[3]s -f THIS.yaml
# kubectl wait%[3]s --for=condition=complete --timeout=24h job/%[4]s
# kubectl patch%[3]s job/%[5]s --type=merge -p '{"spec":{"suspend":false}}'
# kubectl wait%[3]s --for=condition=complete --timeout=1h job/%[5]s
#
# The shards' Indexed Job runs pod K-1 as quicbench run --shard K/%[2]d into
# /results/shard-K.db; a failed pod is retried (backoffLimitPerIndex) and resumes
# that database. /results is the PersistentVolumeClaim %[6]s, which must be
# ReadWriteMany when pods of one Job land on several nodes (NFS, CephFS, a cloud
# file store); the merge Job, created suspended, joins the shards into
# /results/all.db once it is unsuspended after the shards' Job is complete.
`, k.Plan, k.Shards, ns, k.JobName(), k.MergeJobName(), k.ClaimName())
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func ptr[T any](v T) *T { return &v }
