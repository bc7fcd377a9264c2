{{/*
Labels of every object: the kustomize bundle's (app.kubernetes.io/part-of:
oce) plus Helm's own. Pod template labels stay the bundle's alone, so a
chart upgrade that changes nothing else rolls no Pod.
*/}}
{{- define "oce.labels" -}}
app.kubernetes.io/part-of: oce
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The coordinator's labels: the selector's plus every object's. */}}
{{- define "oce.coordinatorLabels" -}}
app.kubernetes.io/name: oce-coordinator
{{ include "oce.labels" . }}
{{- end -}}

{{/* An image reference: repository@digest, else repository:tag. */}}
{{- define "oce.image" -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ .tag }}
{{- end -}}
{{- end -}}

{{/*
Every address members and clients dial: coordinator/certs.InstallHosts
(the members' stable names, the API Service in each form, the loopback a
port-forward is dialed by), then tls.extraNames. The Go tests compare it
with certs.InstallHosts.
*/}}
{{- define "oce.dnsNames" -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list "*.oce-coordinator" "oce-coordinator" (printf "*.oce-coordinator.%s.svc" $ns) (printf "oce-coordinator.%s.svc" $ns) "oce-coordinator-api" (printf "oce-coordinator-api.%s" $ns) (printf "oce-coordinator-api.%s.svc" $ns) (printf "oce-coordinator-api.%s.svc.cluster.local" $ns) "localhost" -}}
{{- range .Values.tls.extraNames }}{{ if not (include "oce.isIP" .) }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- toJson $names -}}
{{- end -}}

{{/* "true" for an IPv4 or IPv6 address (a DNS name holds no ':'), else "". */}}
{{- define "oce.isIP" -}}
{{- if or (regexMatch "^[0-9]{1,3}(\\.[0-9]{1,3}){3}$" .) (contains ":" .) }}true{{ end -}}
{{- end -}}

{{- define "oce.ipAddresses" -}}
{{- $ips := list "127.0.0.1" "::1" -}}
{{- range .Values.tls.extraNames }}{{ if include "oce.isIP" . }}{{ $ips = append $ips . }}{{ end }}{{ end -}}
{{- toJson $ips -}}
{{- end -}}

{{/* The ClusterRoleBinding's name: the bundle's in oce-system, one per namespace elsewhere. */}}
{{- define "oce.driverBinding" -}}
{{- if eq .Release.Namespace "oce-system" -}}
oce-coordinator-driver
{{- else -}}
oce-coordinator-driver-{{ .Release.Namespace }}
{{- end -}}
{{- end -}}
