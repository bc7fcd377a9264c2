package kubernetes

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// In-container paths (shared/contract, docs/RUNTIME-CONTRACT.md).
const (
	pathSecrets       = contract.PathSecretsDir
	pathEnrollment    = contract.PathEnrollmentDir
	pathHome          = contract.PathHome
	pathState         = contract.PathOpenClawState
	pathWorkspace     = contract.PathWorkspace
	pathCodexHome     = contract.PathCodexHome // on the runtime-state emptyDir: login state is Pod-lifetime
	pathCodexState    = contract.PathCodexState
	pathNodeState     = contract.PathNodehostState
	pathGatewayConfig = contract.PathAdmittedConfig
	pathNativeConfig  = contract.PathNativeConfig
	pathNodehost      = contract.PathNodehostBin

	configKeyGateway = "openclaw.json"
	configKeyNative  = "native-config.json"
	enrollmentKey    = contract.EnrollmentFile
)

// CodexLoginModes are the Codex login modes the Harness (harnessd)
// supports: the dedicated Codex bindings the driver advertises, no more.
var CodexLoginModes = []string{contract.LoginAPIKey, contract.LoginCodexPAT, contract.LoginServiceAccount}

// loginMode is the revision's Codex login mode (api_key when unbound).
func loginMode(rev state.Revision) string {
	if a := rev.HarnessAuth; a != nil && a.Method != "" {
		return a.Method
	}
	return contract.LoginAPIKey
}

// privateRanges are excluded from model egress (docs/design/reference.md#s8-3).
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"}

// plan is everything one revision renders to, in creation order.
type plan struct {
	rev       state.Revision
	topo      contract.Topology
	n         names
	dp, gw    string // data-plane and Gateway namespaces (equal for embedded)
	own       owner  // revision owner
	agentOwn  owner  // Agent owner
	gwPodSel  map[string]string
	harPodSel map[string]string
}

func (d *Driver) planFor(rev state.Revision) (*plan, error) {
	t, err := topologyOf(rev)
	if err != nil {
		return nil, err
	}
	o := revisionOwner(rev)
	if err := o.validate(); err != nil {
		return nil, compute.Permanent(codes.InvalidTarget, err)
	}
	p := &plan{rev: rev, topo: t, n: namesFor(rev.AgentID, rev.ID), dp: DataPlaneNamespace(rev.NamespaceID),
		gw: gatewayNamespaceOf(rev, t), own: o, agentOwn: o.agentOnly()}
	p.gwPodSel = merge(p.agentOwn.labels(), map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway})
	p.harPodSel = merge(p.own.labels(), map[string]string{LabelRole: RoleAgent, LabelName: p.n.harness})
	return p, nil
}

func meta(name, ns string, o owner, extra map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: merge(o.labels(), extra), Annotations: o.annotations()}
}

func ptr[T any](v T) *T { return &v }

// gatewayPodLabels are the labels of the revision's Gateway Pods.
func (p *plan) gatewayPodLabels() map[string]string {
	return merge(p.own.labels(), map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway,
		LabelNetworkProfile: NetworkProfileOrdinary, LabelServiceAccount: p.n.gateway})
}

func (p *plan) harnessPodLabels() map[string]string {
	return merge(p.harPodSel, map[string]string{LabelNetworkProfile: NetworkProfileOrdinary, LabelServiceAccount: p.n.agent})
}

// gatewayWantLabels / harnessWantLabels are the exact labels readiness
// selects and requires (network profile checked separately).
func (p *plan) gatewayWantLabels() map[string]string {
	return merge(p.own.labels(), map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway})
}

func (p *plan) harnessWantLabels() map[string]string { return p.harPodSel }

func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000)),
		FSGroup: ptr(int64(1000)), FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000)),
		AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true), Privileged: ptr(false),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func execProbe(cmd ...string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}},
		PeriodSeconds: ProbePeriodSeconds, TimeoutSeconds: 2, FailureThreshold: 1, SuccessThreshold: 1}
}

// startupProbe asks the supervisor's status server whether startup is over
// (GET /startupz on the plugin-status port, no credential): it answers 200
// once the startup phases finished OR a failure is held, so kubelet never
// restarts a held container (docs/design/seed-000.md: a failed check holds the runtime
// unready until repair; a restart would repeat login and the model probe).
// The readiness probe then runs and keeps failing with the held reason.
func startupProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: contract.RouteStartupz, Port: intstr.FromString("plugin-status"), Scheme: corev1.URISchemeHTTP}},
		PeriodSeconds: ProbePeriodSeconds, TimeoutSeconds: 2, FailureThreshold: StartupProbeFailureThreshold, SuccessThreshold: 1}
}

func emptyDirs() []corev1.Volume {
	return []corev1.Volume{
		{Name: "runtime-state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Gi"))}}},
		{Name: "runtime-temporary", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("64Mi"))}}},
	}
}

func baseMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: "runtime-state", MountPath: pathHome, SubPath: "home"},
		{Name: "runtime-temporary", MountPath: "/tmp", SubPath: "tmp"},
	}
}

// initContainer prepares the private directories (mode 0700, owned by the
// runtime uid) and the mode-0700 /tmp below the fsGroup-writable emptyDir
// root, without credentials or privileges (docs/design/seed-000.md#step-3).
func initContainer(image, claimVolume string, dirs []string) corev1.Container {
	var b strings.Builder
	b.WriteString("set -eu; umask 077; ")
	paths := []string{"/runtime-temporary/tmp", "/runtime-state/home"}
	for _, d := range dirs {
		paths = append(paths, "/private/"+d)
	}
	fmt.Fprintf(&b, "mkdir -p %s; chmod 0700 %s", strings.Join(paths, " "), strings.Join(paths, " "))
	return corev1.Container{
		Name: "prepare-private-state", Image: image, Command: []string{"/bin/sh", "-c", b.String()},
		SecurityContext: containerSecurityContext(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: claimVolume, MountPath: "/private"},
			{Name: "runtime-temporary", MountPath: "/runtime-temporary"},
			{Name: "runtime-state", MountPath: "/runtime-state"},
		},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
	}
}

func env(kv ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func projected(name string, keys ...string) corev1.VolumeProjection {
	items := make([]corev1.KeyToPath, 0, len(keys))
	for _, k := range keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	return corev1.VolumeProjection{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items}}
}

// gatewayURL is the Agent's published Gateway route (the stable Service).
func (p *plan) gatewayURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", p.n.gateway, p.gw, contract.GatewayPort)
}

// nodeGatewayURL is where the Harness's workspace node reaches its Gateway:
// the nonserving node route, which selects the Agent's Gateway Pods
// whatever revision they run, before activation too (docs/design/seed-002.md: a
// nonserving route for the candidate), so the candidate node can enroll
// with the candidate Gateway and later reconnect to the active one.
func (p *plan) nodeGatewayURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", p.n.nodeRoute, p.gw, contract.GatewayPort)
}

// nodeRoutePublicURL is the node route as a setup code names it: by the
// Service's cluster IP. The pinned OpenClaw mints ws:// setup codes only
// for loopback, private-LAN addresses and .local hosts (its device-pair
// plugin refuses "x.ns.svc" names: found on real Pods, where every
// setup-code call failed INVALID_REQUEST); a cluster IP is a private
// address whatever the cluster domain. The node itself dials its
// configured route (OCE_NODEHOST_GATEWAY_URL), which overrides the code's.
func nodeRoutePublicURL(svc *corev1.Service) (string, error) {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		return "", fmt.Errorf("%w: node route %s/%s has no cluster IP yet", ErrNotReady, svc.Namespace, svc.Name)
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(contract.GatewayPort)), nil
}

// harnessHost is where the revision's Gateway reaches its own Harness (the
// app-server and the plugin-status peer): the revision's Harness Service,
// which selects exactly that revision's Harness Pods from the start, so the
// candidate Gateway's peer wait is answered before activation.
func (p *plan) harnessHost() string { return fmt.Sprintf("%s.%s.svc", p.n.harness, p.dp) }

// gatewayDeployment renders the Agent's stable Gateway Deployment running
// this revision. Its selector carries no revision (activation switches the
// template); its metadata names the revision it runs. publicURL is the
// Gateway as the workspace node sees it, for the setup codes it mints
// (dedicated: nodeRoutePublicURL; "" for embedded, which has no node).
func (d *Driver) gatewayDeployment(p *plan, modelKeys []string, node, publicURL string) *appsv1.Deployment {
	embedded := p.topo == contract.Embedded
	if publicURL == "" {
		publicURL = p.gatewayURL()
	}
	e := env(
		contract.EnvNamespaceID, p.rev.NamespaceID, contract.EnvAgentID, p.rev.AgentID, contract.EnvRevisionID, p.rev.ID,
		contract.EnvStatusAddr, fmt.Sprintf(":%d", contract.StatusPort), contract.EnvSecretsDir, pathSecrets,
		contract.EnvStatusTokenFile, pathSecrets+"/"+contract.SecretStatusToken, contract.EnvTmpDir, "/tmp",
		contract.EnvTopology, string(p.topo), contract.EnvAdmittedConfig, pathGatewayConfig,
		contract.EnvGatewayConfigDir, contract.PathGatewayConfigDir, contract.EnvOpenClawStateDir, pathState,
		contract.EnvGatewayPort, fmt.Sprint(contract.GatewayPort), contract.EnvGatewayBind, contract.BindLAN,
		contract.EnvGatewayPublicURL, publicURL, contract.EnvPlugins, strings.Join(p.rev.Plugins, ","),
	)
	e = append(e, d.providerEnv(false)...)
	mounts := append(baseMounts(),
		corev1.VolumeMount{Name: "gateway-state", MountPath: pathState, SubPath: "state"},
		corev1.VolumeMount{Name: "gateway-state", MountPath: pathState + "/agents", SubPath: "agent"},
		corev1.VolumeMount{Name: "gateway-state", MountPath: pathState + "/media", SubPath: "media"},
		corev1.VolumeMount{Name: "config", MountPath: pathGatewayConfig, SubPath: configKeyGateway, ReadOnly: true},
		corev1.VolumeMount{Name: "secrets", MountPath: pathSecrets, ReadOnly: true},
	)
	sources := []corev1.VolumeProjection{projected(p.n.password, contract.SecretGatewayPassword, contract.SecretStatusToken)}
	dirs := []string{"state", "agent", "media"}
	if embedded {
		e = append(e, env(contract.EnvWorkspaceDir, pathWorkspace)...)
		mounts = append(mounts, corev1.VolumeMount{Name: "gateway-state", MountPath: pathWorkspace, SubPath: "sessions/workspace"})
		dirs = append(dirs, "sessions/workspace")
		if len(modelKeys) > 0 {
			sources = append(sources, projected(p.n.harnessSecrets, modelKeys...))
		}
	} else {
		e = append(e, env(
			contract.EnvPeerStatusURL, contract.PeerStatusURL(p.harnessHost(), contract.StatusPort),
			contract.EnvAppServerURL, contract.AppServerURL(p.harnessHost(), contract.AppServerPort),
		)...)
		sources = append(sources, projected(p.n.transport, contract.SecretAppServerToken, contract.SecretPluginStatusKey))
		if node != "" {
			// Pinned to the Agent's enrolled workspace node: gatewayd renders
			// its command allow-list and file-transfer policy from it.
			e = append(e, env(contract.EnvWorkspaceNodeID, node)...)
		}
	}
	e = append(e, d.providerEnv(false)...)
	volumes := append(emptyDirs(),
		corev1.Volume{Name: "gateway-state", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.n.gatewayState}}},
		corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.n.gatewayConfig}, DefaultMode: ptr(int32(0o440))}}},
		corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: sources, DefaultMode: ptr(int32(0o400))}}},
	)
	nodeSel := d.cfg.NodeSelector
	if !embedded {
		nodeSel = d.cfg.GatewayNodeSelector
	}
	podLabels := p.gatewayPodLabels()
	return &appsv1.Deployment{
		ObjectMeta: meta(p.n.gateway, p.gw, p.own, map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway}),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: p.gwPodSel},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: p.own.annotations()},
				Spec: corev1.PodSpec{
					ServiceAccountName:            p.n.gateway,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(GatewayTerminationGraceSeconds)),
					SecurityContext:               podSecurityContext(),
					NodeSelector:                  nodeSel,
					InitContainers:                []corev1.Container{initContainer(d.cfg.GatewayImage, "gateway-state", dirs)},
					Containers: []corev1.Container{{
						Name: "gateway", Image: d.cfg.GatewayImage,
						Command: []string{"tini", "-s", "-e", "143", "--", "gatewayd"},
						Env:     e,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: contract.GatewayPort},
							{Name: "plugin-status", ContainerPort: contract.StatusPort}},
						ReadinessProbe:  execProbe("gatewayd", "ready"),
						StartupProbe:    startupProbe(),
						SecurityContext: containerSecurityContext(),
						VolumeMounts:    mounts,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")}},
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// harnessDeployment renders the dedicated Codex Harness (harnessd with its
// companion nodehost) in the data-plane namespace.
func (d *Driver) harnessDeployment(p *plan, modelKeys []string) *appsv1.Deployment {
	login := loginMode(p.rev)
	e := env(
		contract.EnvNamespaceID, p.rev.NamespaceID, contract.EnvAgentID, p.rev.AgentID, contract.EnvRevisionID, p.rev.ID,
		contract.EnvStatusAddr, fmt.Sprintf(":%d", contract.StatusPort), contract.EnvSecretsDir, pathSecrets, contract.EnvTmpDir, "/tmp",
		contract.EnvCodexLoginMode, login, contract.EnvCodexHome, pathCodexHome, contract.EnvWorkspaceDir, pathWorkspace,
		contract.EnvNativeConfig, pathNativeConfig, contract.EnvAppServerPort, fmt.Sprint(contract.AppServerPort),
		contract.EnvAppServerBind, contract.AppServerBindAll,
		contract.EnvPlugins, strings.Join(p.rev.Plugins, ","), contract.EnvNodehostBin, pathNodehost,
		contract.EnvCodexStateDir, pathCodexState, contract.EnvNodehostStateDir, pathNodeState,
		contract.EnvNodehostEnrollment, pathEnrollment+"/"+enrollmentKey, contract.EnvNodehostGatewayURL, p.nodeGatewayURL(),
	)
	e = append(e, d.providerEnv(true)...)
	e = append(e, corev1.EnvVar{Name: contract.EnvPodUID, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
	if login == contract.LoginServiceAccount {
		e = append(e, corev1.EnvVar{Name: contract.EnvCodexWorkspaceID, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.n.harnessSecrets}, Key: contract.SecretCodexWorkspaceID}}})
	}
	e = append(e, d.providerEnv(true)...)
	sources := []corev1.VolumeProjection{projected(p.n.transport, contract.SecretAppServerToken, contract.SecretPluginStatusKey)}
	if len(modelKeys) > 0 {
		sources = append(sources, projected(p.n.harnessSecrets, modelKeys...))
	}
	volumes := append(emptyDirs(),
		corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.n.workspace}}},
		corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.n.harnessConfig}, DefaultMode: ptr(int32(0o440))}}},
		corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: sources, DefaultMode: ptr(int32(0o400))}}},
		// Only the setup code is delivered, as the mode-0600 file nodehost
		// requires; Optional lets the Pod start before it is minted and
		// keep running after it is removed.
		corev1.Volume{Name: "enrollment", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: p.n.enrollment, DefaultMode: ptr(int32(0o600)), Optional: ptr(true),
			Items: []corev1.KeyToPath{{Key: KeySetupCode, Path: enrollmentKey, Mode: ptr(int32(0o600))}}}}},
	)
	mounts := append(baseMounts(),
		corev1.VolumeMount{Name: "workspace", MountPath: pathWorkspace, SubPath: "workspace"},
		corev1.VolumeMount{Name: "workspace", MountPath: pathCodexState, SubPath: contract.ClaimCodexState},
		corev1.VolumeMount{Name: "workspace", MountPath: pathNodeState, SubPath: contract.ClaimNodeState},
		corev1.VolumeMount{Name: "config", MountPath: pathNativeConfig, SubPath: configKeyNative, ReadOnly: true},
		corev1.VolumeMount{Name: "secrets", MountPath: pathSecrets, ReadOnly: true},
		corev1.VolumeMount{Name: "enrollment", MountPath: pathEnrollment, ReadOnly: true},
	)
	return &appsv1.Deployment{
		ObjectMeta: meta(p.n.harness, p.dp, p.own, map[string]string{LabelRole: RoleAgent, LabelName: p.n.harness}),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: p.harPodSel},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: p.harnessPodLabels(), Annotations: p.own.annotations()},
				Spec: corev1.PodSpec{
					ServiceAccountName:            p.n.agent,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(30)),
					SecurityContext:               podSecurityContext(),
					NodeSelector:                  d.cfg.NodeSelector,
					InitContainers:                []corev1.Container{initContainer(d.cfg.HarnessImage, "workspace", []string{"workspace", contract.ClaimCodexState, contract.ClaimNodeState})},
					Containers: []corev1.Container{{
						Name: "harness", Image: d.cfg.HarnessImage,
						Command: []string{"tini", "-s", "-e", "143", "--", "harnessd"},
						Env:     e,
						Ports: []corev1.ContainerPort{{Name: "websocket", ContainerPort: contract.AppServerPort},
							{Name: "plugin-status", ContainerPort: contract.StatusPort}},
						ReadinessProbe:  execProbe("harnessd", "ready"),
						StartupProbe:    startupProbe(),
						SecurityContext: containerSecurityContext(),
						VolumeMounts:    mounts,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

func claim(name, ns string, o owner, size, class string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: meta(name, ns, o, nil),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if class != "" {
		c.Spec.StorageClassName = ptr(class)
	}
	return c
}

func serviceAccount(name, ns string, o owner) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: meta(name, ns, o, map[string]string{LabelServiceAccount: name}),
		AutomountServiceAccountToken: ptr(false)}
}

// gatewayService is the Agent's stable Gateway Service. Until activation
// its selector carries the non-matching <name>-inactive value.
func gatewayService(p *plan, active bool) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.gateway, p.gw, p.agentOwn, map[string]string{LabelRole: RoleGateway}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: gatewayServiceSelector(p, active),
			Ports: []corev1.ServicePort{{Name: "http", Port: contract.GatewayPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}},
	}
}

// gatewayServiceSelector carries the Namespace, Agent and gateway role
// labels without a revision, so the stable route is not tied to one.
func gatewayServiceSelector(p *plan, active bool) map[string]string {
	s := merge(p.gwPodSel)
	if !active {
		s[LabelName] = p.n.inactiveGateway
	}
	return s
}

// harnessService is the Agent's dedicated Harness Service; its active
// selector carries the Namespace, Agent, revision and role labels plus the
// Compute-owned workload name (docs/design/seed-000.md#step-2).
func harnessService(p *plan, active bool) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.agent, p.dp, p.agentOwn, map[string]string{LabelRole: RoleAgent}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: harnessServiceSelector(p, active),
			Ports: []corev1.ServicePort{
				{Name: "websocket", Port: contract.AppServerPort, TargetPort: intstr.FromString("websocket"), Protocol: corev1.ProtocolTCP},
				{Name: "plugin-status", Port: contract.StatusPort, TargetPort: intstr.FromString("plugin-status"), Protocol: corev1.ProtocolTCP},
			}},
	}
}

// nodeRouteService is the Agent's nonserving node bootstrap route in the
// Gateway namespace: only the Gateway port, selecting the Agent's Gateway
// Pods (no revision). It is never published; workspace nodes use it.
func nodeRouteService(p *plan) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.nodeRoute, p.gw, p.agentOwn, map[string]string{LabelRole: RoleGateway}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: merge(p.gwPodSel),
			Ports: []corev1.ServicePort{{Name: "http", Port: contract.GatewayPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}},
	}
}

// harnessRevisionService is the revision's own Harness Service (revision
// owned, retired with it): the exact revision's Harness Pods, for that
// revision's Gateway only.
func harnessRevisionService(p *plan) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.harness, p.dp, p.own, map[string]string{LabelRole: RoleAgent}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: merge(p.harPodSel),
			Ports: []corev1.ServicePort{
				{Name: "websocket", Port: contract.AppServerPort, TargetPort: intstr.FromString("websocket"), Protocol: corev1.ProtocolTCP},
				{Name: "plugin-status", Port: contract.StatusPort, TargetPort: intstr.FromString("plugin-status"), Protocol: corev1.ProtocolTCP},
			}},
	}
}

func harnessServiceSelector(p *plan, active bool) map[string]string {
	if !active {
		return merge(p.agentOwn.labels(), map[string]string{LabelRole: RoleAgent, LabelName: p.n.inactiveAgent})
	}
	return merge(p.harPodSel)
}

func configMap(name, ns string, o owner, key string, doc []byte) *corev1.ConfigMap {
	if len(doc) == 0 {
		doc = []byte("{}")
	}
	return &corev1.ConfigMap{ObjectMeta: meta(name, ns, o, nil), Immutable: ptr(true), Data: map[string]string{key: string(doc)}}
}

func secret(name, ns string, o owner, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: meta(name, ns, o, nil), Type: corev1.SecretTypeOpaque, Data: data}
}

// Namespace-scoped policies (EnsureNamespace).

func defaultDeny(ns string, l, a map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: ns, Labels: l, Annotations: a},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
	}
}

func allowDNS(ns string, l, a map[string]string) *networkingv1.NetworkPolicy {
	var ports []networkingv1.NetworkPolicyPort
	for _, port := range []int{53, 5353} {
		for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: ptr(proto), Port: ptr(intstr.FromInt(port))})
		}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-dns", Namespace: ns, Labels: l, Annotations: a},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelNetworkProfile: NetworkProfileOrdinary}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: ports}},
		},
	}
}

func tcpPorts(ports ...int) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt(p))})
	}
	return out
}

// peer selects exactly the other side: its namespace by name AND its Pods
// by the exact Namespace/Agent/revision/role labels plus the network profile.
func peer(ns string, podLabels map[string]string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: merge(podLabels, map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})},
	}
}

// coordinatorIngress admits the coordinator to a Gateway's status port
// (setup codes, node lists and relayed turns go to gatewayd there), when
// the driver knows where the coordinator's Pods are.
func (d *Driver) coordinatorIngress() []networkingv1.NetworkPolicyIngressRule {
	c := d.cfg.Coordinator
	if c.Namespace == "" || len(c.PodLabels) == 0 {
		return nil
	}
	return []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": c.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: merge(c.PodLabels)},
		}},
		Ports: tcpPorts(contract.StatusPort),
	}}
}

// revisionPolicies renders the revision's allow policies.
func (d *Driver) revisionPolicies(p *plan) []*networkingv1.NetworkPolicy {
	gwSel := merge(p.gatewayWantLabels(), map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})
	harSel := merge(p.harnessWantLabels(), map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})
	modelEgress := networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: privateRanges}}},
		Ports: tcpPorts(443),
	}
	runtimeSel := harSel
	runtimeNS := p.dp
	if p.topo == contract.Embedded {
		runtimeSel = gwSel
	}
	out := []*networkingv1.NetworkPolicy{{
		ObjectMeta: meta(p.n.policyRuntime, runtimeNS, p.own, nil),
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: runtimeSel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: []networkingv1.NetworkPolicyEgressRule{modelEgress}},
	}}
	gatewayIngress := networkingv1.NetworkPolicyIngressRule{Ports: tcpPorts(contract.GatewayPort)} // the route (any source; the password authenticates)
	if p.topo == contract.Embedded {
		out = append(out, &networkingv1.NetworkPolicy{
			ObjectMeta: meta(p.n.policyGateway, p.gw, p.own, nil),
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: gwSel},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     append([]networkingv1.NetworkPolicyIngressRule{gatewayIngress}, d.coordinatorIngress()...)},
		})
		return out
	}
	harPeer := peer(p.dp, p.harnessWantLabels())
	gwPeer := peer(p.gw, p.gatewayWantLabels())
	out = append(out,
		&networkingv1.NetworkPolicy{ // allow-gateway-agent, Gateway side
			ObjectMeta: meta(p.n.policyGateway, p.gw, p.own, nil),
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: gwSel},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress: append([]networkingv1.NetworkPolicyIngressRule{gatewayIngress,
					{From: []networkingv1.NetworkPolicyPeer{harPeer}, Ports: tcpPorts(contract.GatewayPort)}}, d.coordinatorIngress()...),
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{harPeer}, Ports: tcpPorts(contract.AppServerPort, contract.StatusPort)}}},
		},
		&networkingv1.NetworkPolicy{ // allow-gateway-agent, Harness side
			ObjectMeta: meta(p.n.policyHarness, p.dp, p.own, nil),
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: harSel},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{gwPeer}, Ports: tcpPorts(contract.AppServerPort, contract.StatusPort)}},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{gwPeer}, Ports: tcpPorts(contract.GatewayPort)}}},
		},
	)
	return out
}
