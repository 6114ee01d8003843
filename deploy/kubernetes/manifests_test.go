package kubernetes

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tandemdb/tandem/targets"
)

// docs splits a manifest file into its YAML documents.
func docs(t *testing.T, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range strings.Split(string(b), "\n---\n") {
		out = append(out, []byte(d))
	}
	return out
}

// strict decodes one document into v; an unknown field fails.
func strict(t *testing.T, file string, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func TestJobIsIndexedAndGetsCredentialsFromASecret(t *testing.T) {
	var job batchv1.Job
	d := docs(t, "job.yaml")
	if len(d) != 1 {
		t.Fatalf("job.yaml: %d documents", len(d))
	}
	strict(t, "job.yaml", d[0], &job)
	s := job.Spec
	if job.Kind != "Job" || s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("not an Indexed Job: kind %s, completionMode %v", job.Kind, s.CompletionMode)
	}
	if s.Parallelism == nil || s.Completions == nil || *s.Parallelism != *s.Completions || *s.Completions < 2 {
		t.Fatalf("parallelism %v, completions %v: want equal (every shard at once)", s.Parallelism, s.Completions)
	}
	c := s.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"replay ", "--shards=" + strconv.Itoa(int(*s.Completions)), "--start-at=$(START_AT)", "--run-id=$(RUN_ID)",
		"--run=/runs/$(RUN_ID)/shard-$(JOB_COMPLETION_INDEX)", "--config=/etc/tandem/targets.yaml"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	// Every credential comes from a Secret; no literal value looks like one.
	secrets := 0
	for _, e := range c.Env {
		if strings.Contains(strings.ToUpper(e.Name), "PASSWORD") {
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("env %s: a credential not from a Secret", e.Name)
			}
			secrets++
		}
	}
	if secrets != 2 {
		t.Errorf("%d credentials from Secrets, want 2 (one per target)", secrets)
	}
	if job.Spec.Template.Annotations["prometheus.io/port"] != "9471" || c.Ports[0].ContainerPort != 9471 {
		t.Errorf("metrics port: annotations %v, ports %v", job.Spec.Template.Annotations, c.Ports)
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.ReadOnly
	}
	if !mounts["capture"] || !mounts["targets"] || mounts["runs"] {
		t.Errorf("mounts (read-only): %v", mounts)
	}
}

func TestConfigMapHoldsTargetsWithoutCredentials(t *testing.T) {
	var cm corev1.ConfigMap
	strict(t, "configmap.yaml", docs(t, "configmap.yaml")[0], &cm)
	body := cm.Data["targets.yaml"]
	if strings.Contains(strings.ToLower(body), "password:") {
		t.Error("the ConfigMap holds a password field")
	}
	// It is a targets file tandem reads, once the Secret's variables are set.
	t.Setenv("TANDEM_INNODB_PASSWORD", "p1")
	t.Setenv("TANDEM_MYROCKS_PASSWORD", "p2")
	f := t.TempDir() + "/targets.yaml"
	os.WriteFile(f, []byte(body), 0o644)
	ts, err := targets.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{ts[0].Name, ts[1].Name}
	if !slices.Equal(names, []string{"innodb", "myrocks"}) || !ts[0].Baseline || ts[1].Engine != "ROCKSDB" || !strings.HasPrefix(ts[0].DSN, "tandem:p1@") {
		t.Errorf("targets %+v", ts)
	}
}

func TestVolumes(t *testing.T) {
	var modes []corev1.PersistentVolumeAccessMode
	for _, d := range docs(t, "volumes.yaml") {
		var pvc corev1.PersistentVolumeClaim
		strict(t, "volumes.yaml", d, &pvc)
		modes = append(modes, pvc.Spec.AccessModes...)
	}
	if !slices.Equal(modes, []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}) {
		t.Errorf("access modes %v", modes)
	}
}

// An unknown field fails (the decoding is strict).
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  paralelism: 4\n"), &job); err == nil {
		t.Fatal("a misspelt field decoded")
	}
}
