package kubernetes

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"oce.dev/oce/shared/contract"
)

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
						Resources:       p.gwRes,
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
		contract.EnvNodehostIdentity, pathEnrollment+"/"+contract.NodeIdentityFile,
	)
	e = append(e, d.providerEnv(true)...)
	e = append(e, corev1.EnvVar{Name: contract.EnvPodUID, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
	if login == contract.LoginServiceAccount {
		e = append(e, corev1.EnvVar{Name: contract.EnvCodexWorkspaceID, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.n.harnessSecrets}, Key: contract.SecretCodexWorkspaceID}}})
	}
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
		// Only the setup code and a provisioned node identity are
		// delivered, as the mode-0600 files nodehost requires; Optional
		// lets the Pod start before they exist and keep running after they
		// are removed.
		corev1.Volume{Name: "enrollment", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: p.n.enrollment, DefaultMode: ptr(int32(0o600)), Optional: ptr(true),
			Items: []corev1.KeyToPath{{Key: KeySetupCode, Path: enrollmentKey, Mode: ptr(int32(0o600))},
				{Key: KeyNodeIdentity, Path: contract.NodeIdentityFile, Mode: ptr(int32(0o600))}}}}},
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
						Resources:       p.harRes,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

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

// harnessHost is where the revision's Gateway reaches its own Harness (the
// app-server and the plugin-status peer): the revision's Harness Service,
// which selects exactly that revision's Harness Pods from the start, so the
// candidate Gateway's peer wait is answered before activation.
func (p *plan) harnessHost() string { return fmt.Sprintf("%s.%s.svc", p.n.harness, p.dp) }

// providerEnv renders Config.ProviderBaseURLs into a supervisor's
// environment (contract.ProviderEndpoints), so the runtimes call the same
// endpoint the coordinator's pre-cutover credential check calls.
func (d *Driver) providerEnv(harness bool) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range contract.ProviderEndpoints(d.cfg.ProviderBaseURLs, harness) {
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return out
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
		Resources: initRequirements(),
	}
}

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
