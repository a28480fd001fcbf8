package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// decodeStream splits a multi-document YAML stream and decodes each
// document into the k8s type of its kind.
func decodeStream(t *testing.T, data []byte) (cms []corev1.ConfigMap, pvcs []corev1.PersistentVolumeClaim, jobs []batchv1.Job) {
	t.Helper()
	for i, doc := range strings.Split(string(data), "\n---\n") {
		if i == 0 {
			if !strings.HasPrefix(doc, "#") {
				t.Fatalf("stream does not start with its comment: %q", doc)
			}
			continue
		}
		var tm struct{ Kind, APIVersion string }
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var err error
		switch tm.Kind {
		case "ConfigMap":
			var o corev1.ConfigMap
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			cms = append(cms, o)
		case "PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			pvcs = append(pvcs, o)
		case "Job":
			if tm.APIVersion != "batch/v1" {
				t.Errorf("job apiVersion %q", tm.APIVersion)
			}
			var o batchv1.Job
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			jobs = append(jobs, o)
		default:
			t.Fatalf("document %d: kind %q", i, tm.Kind)
		}
		if err != nil {
			t.Fatalf("document %d (%s): %v", i, tm.Kind, err)
		}
	}
	return
}

func TestK8sManifests(t *testing.T) {
	plan := "name: quick\n# a comment\n"
	k := K8s{Plan: "Quick_Plan", Shards: 5, Image: "reg.example/qb:1", Namespace: "lab", Parallel: 2}
	data, err := k.YAML([]byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	cms, pvcs, jobs := decodeStream(t, data)
	if len(cms) != 1 || len(pvcs) != 1 || len(jobs) != 2 {
		t.Fatalf("got %d config maps, %d claims, %d jobs; want 1, 1, 2:\n%s", len(cms), len(pvcs), len(jobs), data)
	}
	if cm := cms[0]; cm.Name != "qb-quick-plan-plan" || cm.Namespace != "lab" || cm.Data[PlanFile] != plan {
		t.Errorf("config map %s/%s data %q", cm.Namespace, cm.Name, cm.Data)
	}
	pvc := pvcs[0]
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) || pvc.Name != k.ClaimName() {
		t.Errorf("claim %s access modes %v", pvc.Name, pvc.Spec.AccessModes)
	}

	j := jobs[0]
	if j.Name != "qb-quick-plan-shards" || j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("job %s completion mode %v", j.Name, j.Spec.CompletionMode)
	}
	if *j.Spec.Completions != 5 || *j.Spec.Parallelism != 5 {
		t.Errorf("completions %d, parallelism %d; want 5", *j.Spec.Completions, *j.Spec.Parallelism)
	}
	if j.Spec.BackoffLimitPerIndex == nil || *j.Spec.BackoffLimitPerIndex != K8sRetriesPerIndex || j.Spec.PodFailurePolicy == nil {
		t.Errorf("retries: backoffLimitPerIndex %v, podFailurePolicy %v", j.Spec.BackoffLimitPerIndex, j.Spec.PodFailurePolicy)
	}
	pod := j.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("pod restart policy %q, %d containers", pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != k.Image || len(c.Command) != 3 || c.Command[0] != "sh" || c.Command[1] != "-c" {
		t.Fatalf("container image %q command %q", c.Image, c.Command)
	}
	for _, want := range []string{
		"k=$((JOB_COMPLETION_INDEX + 1))",
		`db="/results/shard-$k.db"`,
		`run --resume "$db" --no-report --lines --parallel 2`,
		`run --plan /plan/plan.yaml --shard "$k/$SHARDS" -o "$db" --no-report --lines --parallel 2`,
	} {
		if !strings.Contains(c.Command[2], want) {
			t.Errorf("shard script lacks %q:\n%s", want, c.Command[2])
		}
	}
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "SHARDS", Value: "5"}) {
		t.Errorf("env %v", c.Env)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.Privileged != nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "SYS_NICE"}) {
		t.Errorf("security context %+v", sc)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	if v := vols["tun"]; v.HostPath == nil || v.HostPath.Path != "/dev/net/tun" || *v.HostPath.Type != corev1.HostPathCharDev {
		t.Errorf("tun volume %+v", v)
	}
	if v := vols["results"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.Name {
		t.Errorf("results volume %+v", v)
	}
	if v := vols["plan"]; v.ConfigMap == nil || v.ConfigMap.Name != cms[0].Name {
		t.Errorf("plan volume %+v", v)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["tun"] != "/dev/net/tun" || mounts["results"] != "/results" || mounts["plan"] != "/plan" {
		t.Errorf("mounts %v", mounts)
	}

	m := jobs[1]
	if m.Name != "qb-quick-plan-merge" || m.Spec.Suspend == nil || !*m.Spec.Suspend {
		t.Errorf("merge job %s suspend %v; want it created suspended", m.Name, m.Spec.Suspend)
	}
	mc := m.Spec.Template.Spec.Containers[0]
	if !strings.Contains(strings.Join(mc.Command, " "), "quicbench merge /results/shard-*.db -o /results/all.db") {
		t.Errorf("merge command %q", mc.Command)
	}
}

func TestK8sPrivilegedAndClaim(t *testing.T) {
	k := K8s{Plan: "p", Shards: 1, Image: "qb", Claim: "shared-results", Privileged: true}
	data, err := k.YAML([]byte("name: p\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, pvcs, jobs := decodeStream(t, data)
	if len(pvcs) != 0 {
		t.Errorf("an existing claim was named, but %d claims were generated", len(pvcs))
	}
	pod := jobs[0].Spec.Template.Spec
	sc := pod.Containers[0].SecurityContext
	if sc == nil || sc.Privileged == nil || !*sc.Privileged || sc.Capabilities != nil {
		t.Errorf("security context %+v; want privileged", sc)
	}
	for _, v := range pod.Volumes {
		if v.Name == "tun" {
			t.Error("privileged pod mounts /dev/net/tun")
		}
		if v.Name == "results" && v.PersistentVolumeClaim.ClaimName != "shared-results" {
			t.Errorf("claim %q", v.PersistentVolumeClaim.ClaimName)
		}
	}
}

func TestK8sShardScriptRuns(t *testing.T) {
	k := K8s{Plan: "p", Shards: 4, Image: "qb"}
	dir := t.TempDir()
	fake := fakeQuicbench(t, dir)
	script := strings.ReplaceAll(k.ShardScript(), K8sQuicbench, "'"+fake+"'")
	script = strings.ReplaceAll(script, K8sResultsDir, dir)
	run := func() string {
		c := exec.Command("sh", "-c", script)
		c.Env = append(os.Environ(), "JOB_COMPLETION_INDEX=2", "SHARDS=4")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return string(out)
	}
	if got, want := run(), "[run]\n[--plan]\n[/plan/plan.yaml]\n[--shard]\n[3/4]\n[-o]\n["+dir+"/shard-3.db]\n[--no-report]\n[--lines]\n"; got != want {
		t.Errorf("fresh shard:\n%s\nwant\n%s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "shard-3.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "shard-3.done")); err != nil {
		t.Fatalf("a shard that ended well is not marked done: %v", err)
	}
	if got, want := run(), "[run]\n[--resume]\n["+dir+"/shard-3.db]\n[--no-report]\n[--lines]\n"; got != want {
		t.Errorf("retried shard:\n%s\nwant\n%s", got, want)
	}
	if got, want := run(), "shard 3 is complete: nothing to do\n"; got != want {
		t.Errorf("complete shard:\n%s\nwant\n%s", got, want)
	}
}

func TestK8sValidate(t *testing.T) {
	for _, k := range []K8s{
		{Plan: "p", Shards: 0, Image: "qb"},
		{Plan: "p", Shards: 1, Image: ""},
		{Plan: "p", Shards: 1, Image: "qb", Namespace: "Bad_NS"},
		{Plan: "p", Shards: 1, Image: "qb", Claim: "no claim"},
	} {
		if _, err := k.YAML(nil); err == nil {
			t.Errorf("%+v: no error", k)
		}
	}
}
