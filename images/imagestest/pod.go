package imagestest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"oce.dev/oce/shared/secretfile/secretfiletest"
)

// ErrPod reports a Pod spec this runner cannot run as kubelet would.
var ErrPod = errors.New("imagestest: cannot run pod")

// Objects are the Secrets and ConfigMaps a Pod's volumes name (one namespace).
type Objects struct {
	Secrets    map[string]map[string][]byte
	ConfigMaps map[string]map[string]string
}

// PodConfig is what kubelet would know besides the spec.
type PodConfig struct {
	// Dir holds the bundles, volumes and runc state; it must be private to
	// the test (a t.TempDir()).
	Dir string
	// Name, Namespace and UID fill the downward API (metadata.*).
	Name, Namespace, UID string
	// Images maps a container's image reference to its unpacked image.
	Images map[string]*Unpacked
	// Objects provides the Secrets and ConfigMaps of the volumes.
	Objects Objects
	// Claims maps a PersistentVolumeClaim name to a host directory (created
	// when missing); the directory outlives the Pod like a bound volume.
	Claims map[string]string
	// ExtraEnv is appended to every container's environment: what no real
	// Pod has (e.g. the offline model endpoint of a test).
	ExtraEnv []string
	// Log receives every container's stdout and stderr.
	Log io.Writer
}

// Pod runs one Pod's containers with runc, configured from its spec the way
// kubelet and containerd would: the user and groups of the security
// contexts (fsGroup as a supplementary group), the read-only root, no
// capabilities, no new privileges, emptyDir/PVC/Secret/ConfigMap/projected
// volumes with kubelet's ownership, modes and `..data` layout, subPath
// mounts, /etc/hosts and the image's environment under the container's. The
// containers share the caller's network namespace (a test's loopback-only
// one); each gets its own PID, mount, IPC and UTS namespaces.
type Pod struct {
	cfg     PodConfig
	spec    corev1.PodSpec
	volumes map[string]string // volume name → host dir
	runcDir string
	hosts   string
	seq     int
	mu      sync.Mutex
}

// NewPod materializes the volumes of spec.
func NewPod(cfg PodConfig, spec corev1.PodSpec) (*Pod, error) {
	if cfg.Name == "" {
		cfg.Name = "pod"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	p := &Pod{cfg: cfg, spec: spec, volumes: map[string]string{}, runcDir: filepath.Join(cfg.Dir, "runc")}
	if err := os.MkdirAll(p.runcDir, 0o700); err != nil {
		return nil, err
	}
	fsGroup := -1
	if sc := spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		fsGroup = int(*sc.FSGroup)
	}
	for _, v := range spec.Volumes {
		dir := filepath.Join(cfg.Dir, "volumes", v.Name)
		var err error
		switch {
		case v.EmptyDir != nil:
			err = emptyDir(dir, fsGroup)
		case v.PersistentVolumeClaim != nil:
			host, ok := cfg.Claims[v.PersistentVolumeClaim.ClaimName]
			if !ok {
				return nil, fmt.Errorf("%w: no directory for claim %s", ErrPod, v.PersistentVolumeClaim.ClaimName)
			}
			dir, err = host, claimDir(host, fsGroup)
		case v.Secret != nil:
			err = p.secretVolume(dir, v.Secret, fsGroup)
		case v.ConfigMap != nil:
			err = p.configMapVolume(dir, v.ConfigMap, fsGroup)
		case v.Projected != nil:
			err = p.projectedVolume(dir, v.Projected, fsGroup)
		default:
			return nil, fmt.Errorf("%w: volume %s has an unsupported source", ErrPod, v.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		p.volumes[v.Name] = dir
	}
	p.hosts = filepath.Join(cfg.Dir, "etc-hosts")
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.0.1\t" + cfg.Name + "\n"
	if err := os.WriteFile(p.hosts, []byte(hosts), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// emptyDir: kubelet creates it 0777; an fsGroup makes it group-owned, setgid.
func emptyDir(dir string, fsGroup int) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	mode := os.FileMode(0o777)
	if fsGroup >= 0 {
		if err := os.Chown(dir, 0, fsGroup); err != nil {
			return err
		}
		mode |= os.ModeSetgid
	}
	return os.Chmod(dir, mode)
}

// claimDir applies fsGroupChangePolicy OnRootMismatch to a bound volume:
// when the root's group differs, everything becomes group-owned and group
// read-writable, directories setgid (kubelet's SetVolumeOwnership).
func claimDir(dir string, fsGroup int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if fsGroup < 0 {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if int(st.Sys().(*syscall.Stat_t).Gid) == fsGroup && st.Mode()&os.ModeSetgid != 0 {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, fsGroup); err != nil {
			return err
		}
		mode := info.Mode().Perm() | 0o660
		if d.IsDir() {
			mode |= 0o110 | os.ModeSetgid
		}
		return os.Chmod(path, mode)
	})
}

func modeOr(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}

// atomicVolume writes files as kubelet's atomic writer does (secretfiletest
// holds the layout), with per-item modes applied afterwards.
func atomicVolume(dir string, files map[string][]byte, modes map[string]os.FileMode, def os.FileMode, fsGroup int) error {
	if err := secretfiletest.KubeletVolume(dir, files, def, fsGroup); err != nil {
		return err
	}
	for k, m := range modes {
		if fsGroup >= 0 {
			m |= 0o440
		}
		if err := os.Chmod(filepath.Join(dir, k), m); err != nil {
			return err
		}
	}
	return nil
}

// items selects the keys of a Secret or ConfigMap; a missing key is an
// error unless the source is optional (then it is left out, as kubelet does).
func items(data map[string][]byte, its []corev1.KeyToPath, optional *bool, files map[string][]byte, modes map[string]os.FileMode) error {
	if len(its) == 0 {
		for k, v := range data {
			files[k] = v
		}
		return nil
	}
	for _, it := range its {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%w: key %s missing", ErrPod, it.Key)
		}
		files[it.Path] = v
		if it.Mode != nil {
			modes[it.Path] = os.FileMode(*it.Mode)
		}
	}
	return nil
}

func (p *Pod) secretVolume(dir string, s *corev1.SecretVolumeSource, fsGroup int) error {
	files, modes := map[string][]byte{}, map[string]os.FileMode{}
	data, ok := p.cfg.Objects.Secrets[s.SecretName]
	switch {
	case ok:
		if err := items(data, s.Items, s.Optional, files, modes); err != nil {
			return err
		}
	case s.Optional == nil || !*s.Optional:
		return fmt.Errorf("%w: secret %s not found", ErrPod, s.SecretName)
	}
	return atomicVolume(dir, files, modes, modeOr(s.DefaultMode, 0o644), fsGroup)
}

func (p *Pod) configMapVolume(dir string, c *corev1.ConfigMapVolumeSource, fsGroup int) error {
	files, modes := map[string][]byte{}, map[string]os.FileMode{}
	cm, ok := p.cfg.Objects.ConfigMaps[c.Name]
	switch {
	case ok:
		data := map[string][]byte{}
		for k, v := range cm {
			data[k] = []byte(v)
		}
		if err := items(data, c.Items, c.Optional, files, modes); err != nil {
			return err
		}
	case c.Optional == nil || !*c.Optional:
		return fmt.Errorf("%w: configmap %s not found", ErrPod, c.Name)
	}
	return atomicVolume(dir, files, modes, modeOr(c.DefaultMode, 0o644), fsGroup)
}

func (p *Pod) projectedVolume(dir string, pr *corev1.ProjectedVolumeSource, fsGroup int) error {
	files, modes := map[string][]byte{}, map[string]os.FileMode{}
	for _, src := range pr.Sources {
		switch {
		case src.Secret != nil:
			data, ok := p.cfg.Objects.Secrets[src.Secret.Name]
			if !ok {
				if src.Secret.Optional != nil && *src.Secret.Optional {
					continue
				}
				return fmt.Errorf("%w: secret %s not found", ErrPod, src.Secret.Name)
			}
			if err := items(data, src.Secret.Items, src.Secret.Optional, files, modes); err != nil {
				return err
			}
		case src.ConfigMap != nil:
			cm, ok := p.cfg.Objects.ConfigMaps[src.ConfigMap.Name]
			if !ok {
				return fmt.Errorf("%w: configmap %s not found", ErrPod, src.ConfigMap.Name)
			}
			data := map[string][]byte{}
			for k, v := range cm {
				data[k] = []byte(v)
			}
			if err := items(data, src.ConfigMap.Items, src.ConfigMap.Optional, files, modes); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unsupported projection", ErrPod)
		}
	}
	return atomicVolume(dir, files, modes, modeOr(pr.DefaultMode, 0o644), fsGroup)
}

// Container is one running container.
type Container struct {
	ID   string
	Name string
	pod  *Pod
	cmd  *exec.Cmd
	done chan struct{}
	code int
	err  error
	root string // overlay mount
}

// RunInit runs the init containers in order to completion; a non-zero exit
// is an error.
func (p *Pod) RunInit(ctx context.Context) error {
	for _, c := range p.spec.InitContainers {
		ct, err := p.start(ctx, c)
		if err != nil {
			return err
		}
		code, err := ct.Wait(ctx)
		ct.Delete()
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("%w: init container %s exited %d", ErrPod, c.Name, code)
		}
	}
	return nil
}

// Start starts the container name of the spec.
func (p *Pod) Start(ctx context.Context, name string) (*Container, error) {
	for _, c := range p.spec.Containers {
		if c.Name == name {
			return p.start(ctx, c)
		}
	}
	return nil, fmt.Errorf("%w: no container %s", ErrPod, name)
}

// Spec returns the container spec name (init containers included).
func (p *Pod) Spec(name string) (corev1.Container, bool) {
	for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// Logs returns what the containers wrote, when PodConfig.Log has a String
// method (a logtest.Buffer), else "".
func (p *Pod) Logs() string {
	if s, ok := p.cfg.Log.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

// VolumeDir is the host directory of volume name.
func (p *Pod) VolumeDir(name string) string { return p.volumes[name] }

func (p *Pod) start(ctx context.Context, c corev1.Container) (*Container, error) {
	img, ok := p.cfg.Images[c.Image]
	if !ok {
		return nil, fmt.Errorf("%w: image %s is not loaded", ErrPod, c.Image)
	}
	p.mu.Lock()
	p.seq++
	id := fmt.Sprintf("%s-%s-%d", p.cfg.Name, c.Name, p.seq)
	p.mu.Unlock()
	bundle := filepath.Join(p.cfg.Dir, "bundles", id)
	root := filepath.Join(bundle, "rootfs")
	for _, d := range []string{root, filepath.Join(bundle, "upper"), filepath.Join(bundle, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// containerd's snapshot: the image read-only below, the container's own
	// (runtime-created mount points) above; readOnlyRootFilesystem makes
	// the whole root read-only inside the container.
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", img.RootFS, filepath.Join(bundle, "upper"), filepath.Join(bundle, "work"))
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return nil, fmt.Errorf("overlay for %s: %w", c.Name, err)
	}
	spec, err := p.runtimeSpec(c, img, root)
	if err != nil {
		_ = unix.Unmount(root, unix.MNT_DETACH)
		return nil, err
	}
	b, _ := json.MarshalIndent(spec, "", "  ")
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return nil, err
	}
	ct := &Container{ID: id, Name: c.Name, pod: p, done: make(chan struct{}), root: root}
	ct.cmd = exec.Command("runc", "--root", p.runcDir, "run", "--bundle", bundle, id)
	ct.cmd.Stdout, ct.cmd.Stderr = p.cfg.Log, p.cfg.Log
	ct.cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if err := ct.cmd.Start(); err != nil {
		return nil, fmt.Errorf("runc run: %w", err)
	}
	go func() {
		err := ct.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			ct.code = ee.ExitCode()
		default:
			ct.err = err
		}
		close(ct.done)
	}()
	// running once runc reports the init process
	for {
		if _, err := ct.Pid(); err == nil {
			return ct, nil
		}
		select {
		case <-ct.done:
			return ct, nil // exited already (an init container that was quick)
		case <-ctx.Done():
			ct.Delete()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pid is the host PID of the container's PID 1.
func (c *Container) Pid() (int, error) {
	out, err := exec.Command("runc", "--root", c.pod.runcDir, "state", c.ID).Output()
	if err != nil {
		return 0, err
	}
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, err
	}
	if st.Pid == 0 || st.Status != "running" {
		return 0, fmt.Errorf("container %s is %s", c.ID, st.Status)
	}
	return st.Pid, nil
}

// Done is closed when the container's PID 1 exited.
func (c *Container) Done() <-chan struct{} { return c.done }

// Wait returns PID 1's exit code.
func (c *Container) Wait(ctx context.Context) (int, error) {
	select {
	case <-c.done:
		return c.code, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Signal sends sig to PID 1 (runc kill, as containerd does for a stop).
func (c *Container) Signal(sig unix.Signal) error {
	out, err := exec.Command("runc", "--root", c.pod.runcDir, "kill", c.ID, strconv.Itoa(int(sig))).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runc kill: %v: %s", err, out)
	}
	return nil
}

// Exec runs argv in the container (as its user unless user is set, "uid:gid")
// and returns the combined output and exit code; a probe passes with 0.
func (c *Container) Exec(ctx context.Context, user string, argv ...string) (string, int, error) {
	args := []string{"--root", c.pod.runcDir, "exec"}
	if user != "" {
		args = append(args, "--user", user)
	}
	cmd := exec.CommandContext(ctx, "runc", append(append(args, c.ID), argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode(), nil
	}
	return out.String(), 0, err
}

// Probe runs an exec probe's command within its timeout.
func (c *Container) Probe(ctx context.Context, pr *corev1.Probe) (string, int, error) {
	if pr == nil || pr.Exec == nil {
		return "", 0, fmt.Errorf("%w: not an exec probe", ErrPod)
	}
	timeout := time.Duration(pr.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.Exec(ctx, "", pr.Exec.Command...)
}

// Delete removes the container (killing what is left) and its root mount.
func (c *Container) Delete() {
	_ = exec.Command("runc", "--root", c.pod.runcDir, "delete", "--force", c.ID).Run()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
	_ = unix.Unmount(c.root, unix.MNT_DETACH)
}

func intOr(ps ...*int64) (int64, bool) {
	for _, p := range ps {
		if p != nil {
			return *p, true
		}
	}
	return 0, false
}

// runtimeSpec is the OCI runtime configuration of container c.
func (p *Pod) runtimeSpec(c corev1.Container, img *Unpacked, root string) (map[string]any, error) {
	psc := p.spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	uid, okU := intOr(sc.RunAsUser, psc.RunAsUser)
	gid, okG := intOr(sc.RunAsGroup, psc.RunAsGroup)
	if !okU || !okG {
		// the image's USER "uid:gid" (numeric only)
		u, g, _ := strings.Cut(img.Config.User, ":")
		iu, err1 := strconv.ParseInt(u, 10, 64)
		ig, err2 := strconv.ParseInt(g, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: image user %q is not numeric", ErrPod, img.Config.User)
		}
		if !okU {
			uid = iu
		}
		if !okG {
			gid = ig
		}
	}
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	if nonRoot && uid == 0 {
		return nil, fmt.Errorf("%w: runAsNonRoot and the container would run as root", ErrPod)
	}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)

	caps := map[string]bool{}
	if sc.Capabilities != nil {
		for _, a := range sc.Capabilities.Add {
			caps["CAP_"+string(a)] = true
		}
		drop := map[string]bool{}
		for _, d := range sc.Capabilities.Drop {
			drop[string(d)] = true
		}
		if !drop["ALL"] {
			return nil, fmt.Errorf("%w: only capabilities.drop [ALL] is modelled", ErrPod)
		}
	}
	capList := []string{}
	for k := range caps {
		capList = append(capList, k)
	}
	sort.Strings(capList)

	args := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) == 0 {
		args = append(append([]string{}, img.Config.Entrypoint...), c.Args...)
		if len(c.Args) == 0 {
			args = append(args, img.Config.Cmd...)
		}
	}
	env := append([]string{}, img.Config.Env...)
	set := func(k, v string) {
		for i, e := range env {
			if strings.HasPrefix(e, k+"=") {
				env[i] = k + "=" + v
				return
			}
		}
		env = append(env, k+"="+v)
	}
	set("HOSTNAME", p.cfg.Name)
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("%w: env %s: only fieldRef is modelled", ErrPod, e.Name)
			}
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.uid":
				v = p.cfg.UID
			case "metadata.name":
				v = p.cfg.Name
			case "metadata.namespace":
				v = p.cfg.Namespace
			default:
				return nil, fmt.Errorf("%w: env %s: fieldRef %s", ErrPod, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		set(e.Name, v)
	}
	for _, kv := range p.cfg.ExtraEnv {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	cwd := c.WorkingDir
	if cwd == "" {
		cwd = img.Config.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}

	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
		{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		{"destination": "/etc/hosts", "type": "bind", "source": p.hosts, "options": []string{"rbind", "ro"}},
	}
	for _, m := range c.VolumeMounts {
		src, ok := p.volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("%w: mount of unknown volume %s", ErrPod, m.Name)
		}
		ro := m.ReadOnly || p.readOnlyVolume(m.Name)
		if m.SubPath != "" {
			var err error
			if src, err = subPath(src, m.SubPath); err != nil {
				return nil, fmt.Errorf("mount %s: %w", m.MountPath, err)
			}
		}
		opts := []string{"rbind", "rprivate"}
		if ro {
			opts = append(opts, "ro")
		}
		mounts = append(mounts, map[string]any{"destination": m.MountPath, "type": "bind", "source": src, "options": opts})
	}

	return map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal": false,
			"user":     map[string]any{"uid": uid, "gid": gid, "additionalGids": groups},
			"args":     args,
			"env":      env,
			"cwd":      cwd,
			"capabilities": map[string]any{"bounding": capList, "effective": capList, "inheritable": []string{},
				"permitted": capList, "ambient": []string{}},
			"noNewPrivileges": sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		},
		"root":     map[string]any{"path": root, "readonly": sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		"hostname": p.cfg.Name,
		"mounts":   mounts,
		"linux": map[string]any{
			"cgroupsPath": "/oce-imagestest/" + filepath.Base(filepath.Dir(root)),
			"resources":   map[string]any{"devices": []map[string]any{{"allow": false, "access": "rwm"}}},
			// the network namespace is the caller's (loopback only)
			"namespaces": []map[string]any{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
			"maskedPaths": []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}, nil
}

// readOnlyVolume: kubelet mounts Secret, ConfigMap and projected volumes read-only.
func (p *Pod) readOnlyVolume(name string) bool {
	for _, v := range p.spec.Volumes {
		if v.Name == name {
			return v.Secret != nil || v.ConfigMap != nil || v.Projected != nil
		}
	}
	return false
}

// subPath resolves a subPath inside a volume as kubelet does: symlinks are
// followed only within the volume; a missing path is created with the
// volume root's mode (group and setgid inherited).
func subPath(vol, sub string) (string, error) {
	clean := filepath.Clean("/" + sub)
	if clean != "/"+sub && clean != "/"+strings.TrimSuffix(sub, "/") {
		return "", fmt.Errorf("%w: subPath %q", ErrPod, sub)
	}
	p := filepath.Join(vol, clean)
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		st, err := os.Stat(vol)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(p, st.Mode().Perm()); err != nil {
			return "", err
		}
		return p, nil
	}
	if err != nil {
		return "", err
	}
	volReal, err := filepath.EvalSymlinks(vol)
	if err != nil {
		return "", err
	}
	if real != volReal && !strings.HasPrefix(real, volReal+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: subPath %q leaves the volume", ErrPod, sub)
	}
	return real, nil
}
