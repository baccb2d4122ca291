{{/* Resource names: <release>-<chart> unless the release already holds the chart's name. */}}
{{- define "wqs.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wqs.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector of one component (api, worker-http, worker-browser, migrate): never changes after install. */}}
{{- define "wqs.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* A pinned image: an empty tag or `latest` fails the render. */}}
{{- define "wqs.image" -}}
{{- $tag := toString .Values.image.tag -}}
{{- if or (eq $tag "") (eq $tag "latest") -}}
{{- fail "image.tag must be a pinned version (not empty, not latest)" -}}
{{- end -}}
{{- printf "%s:%s" (required "image.repository is required" .Values.image.repository) $tag -}}
{{- end -}}

{{/* Settings every process reads; DATABASE_URL from the existing Secret, never a value. */}}
{{- define "wqs.env" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.database.name: the Secret holding DATABASE_URL" .Values.secrets.database.name }}
      key: {{ .Values.secrets.database.key }}
- name: PAYLOAD_ENCRYPTION_KEY
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.payload.name: the Secret holding PAYLOAD_ENCRYPTION_KEY" .Values.secrets.payload.name }}
      key: {{ .Values.secrets.payload.key }}
- name: PAYLOAD_PREVIOUS_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secrets.payload.name }}
      key: {{ .Values.secrets.payload.previousKeysKey }}
      optional: true
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address: the Temporal frontend, host:port" .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: TEMPORAL_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: MIGRATE_ON_START
  value: "false"
# Writable places on a read-only root filesystem (tsx's compile cache, Chromium's profile).
- name: DATA_DIR
  value: /tmp/wqs
- name: HOME
  value: /tmp
{{- range $name, $value := .Values.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "wqs.podSpecCommon" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The connections keyring: the API's console encrypts what it stores, the workers decrypt it for runs. */}}
{{- define "wqs.connectionsEnv" -}}
- name: CONNECTIONS_ENCRYPTION_KEY
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.connections.name: the Secret holding CONNECTIONS_ENCRYPTION_KEY" .Values.secrets.connections.name }}
      key: {{ .Values.secrets.connections.key }}
- name: CONNECTIONS_PREVIOUS_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secrets.connections.name }}
      key: {{ .Values.secrets.connections.previousKeysKey }}
      optional: true
{{- end -}}
