{{- define "tessera-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tessera-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tessera-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "tessera-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "tessera-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tessera-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tessera-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Rules for the watched namespaces: exactly the calls in operator/src/rbac.rs (REQUIRED, scope
Watched). A test renders the chart and compares, so keep the two in step.
*/}}
{{- define "tessera-operator.watchedRules" -}}
- apiGroups: ["tessera.rs"]
  resources: ["redisclusters"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["tessera.rs"]
  resources: ["redisclusters/status"]
  verbs: ["patch"]
- apiGroups: ["tessera.rs"]
  resources: ["redisclusters/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services", "configmaps"]
  verbs: ["list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "delete"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- with .Values.rbac.secretNames }}
  resourceNames: {{ toJson . }}
{{- end }}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["cert-manager.io"]
  resources: ["certificates"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
