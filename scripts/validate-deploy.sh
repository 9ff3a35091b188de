#!/usr/bin/env bash
# Validates deploy/ with the tools an operator's CI would use, offline:
#
#   config   stratad parses deploy/stratad.yaml, the compose config and the
#            config the Helm chart renders for each of its ci/ variants
#            (stratad --config FILE --print-config)
#   docker   dockerfile-utils lint of deploy/docker/Dockerfile (npm), and
#            the files it copies exist (no container engine here: the image
#            itself is built where one is)
#   compose  deploy/compose/compose.yaml against the Compose specification's
#            schema (check-jsonschema's vendored copy, PyPI)
#   helm     helm lint --strict (values against values.schema.json too) and
#            helm template | kubeconform -strict, for the default values and
#            each deploy/helm/strata/ci/*-values.yaml
#   systemd  systemd-analyze verify of deploy/systemd/stratad.service (any
#            warning fails) and its offline security exposure
#
# Then it breaks a copy of each file and checks that its validator fails.
#
# Tools are installed once into $STRATA_TOOLS (default ~/.cache/strata-tools):
# helm and kubeconform with `go install` from the Go module proxy; the
# Kubernetes OpenAPI definitions and the ServiceMonitor CRD from the Go
# modules k8s.io/kubernetes and prometheus-operator (`go mod download`),
# turned into kubeconform's strict schemas by scripts/kube-schemas.py, since
# kubeconform's default schema location is not reachable; check-jsonschema
# in a venv; dockerfile-utils with npm; Debian's systemd (apt-get) when
# systemd-analyze is missing. Exits non-zero when any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
K8S_VERSION=v1.34.1 # Kubernetes whose API the manifests are checked against
PROMETHEUS_OPERATOR_VERSION=v0.85.0
CHECK_JSONSCHEMA_VERSION=0.39.0
DOCKERFILE_UTILS_VERSION=0.16.3

tools=${STRATA_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/strata-tools}
mkdir -p "$tools/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say() { printf '%s\n' "$*"; }

# --- tools ---
install_go_tool() { # name module version
  local marker="$tools/bin/.$1-$3"
  if [ ! -x "$tools/bin/$1" ] || [ ! -e "$marker" ]; then
    say "installing $1 $3 (go install $2@$3)"
    GOBIN="$tools/bin" go install "$2@$3"
    touch "$marker"
  fi
}
install_go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
install_go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION"
helm="$tools/bin/helm"
kubeconform="$tools/bin/kubeconform"

moddir() { # module version -> its directory in the module cache
  (cd "$work" && go mod download -json "$1@$2") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
schemas="$tools/kube-schemas-$K8S_VERSION-$PROMETHEUS_OPERATOR_VERSION"
if [ ! -e "$schemas/.done" ]; then
  k8s=$(moddir k8s.io/kubernetes "$K8S_VERSION")
  promop=$(moddir github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION")
  rm -rf "$schemas"
  python3 scripts/kube-schemas.py "$schemas" "$k8s/api/openapi-spec/swagger.json" \
    "$promop/jsonnet/prometheus-operator/servicemonitors-crd.json"
  touch "$schemas/.done"
fi

venv="$tools/venv-check-jsonschema-$CHECK_JSONSCHEMA_VERSION"
if [ ! -x "$venv/bin/check-jsonschema" ]; then
  say "installing check-jsonschema $CHECK_JSONSCHEMA_VERSION (pip, in $venv)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "check-jsonschema==$CHECK_JSONSCHEMA_VERSION"
fi
npmdir="$tools/npm-dockerfile-utils-$DOCKERFILE_UTILS_VERSION"
if [ ! -x "$npmdir/node_modules/.bin/dockerfile-utils" ]; then
  say "installing dockerfile-utils $DOCKERFILE_UTILS_VERSION (npm, in $npmdir)"
  npm install --silent --no-audit --no-fund --prefix "$npmdir" "dockerfile-utils@$DOCKERFILE_UTILS_VERSION" >/dev/null
fi
if ! command -v systemd-analyze >/dev/null; then
  say "installing systemd (apt-get) for systemd-analyze"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

go build -o "$work/stratad" ./cmd/stratad

# --- validators: each returns non-zero on a bad input ---

# check_config FILE: stratad reads it as it would at start.
check_config() {
  "$work/stratad" --config "$1" --print-config >/dev/null
}

# chart_config VALUES_ARGS...: the stratad.yaml the chart renders, on
# stdout, its Secret-mounted token files (read at start) pointed at
# stand-ins under $work/auth.
mkdir -p "$work/auth"
echo 'tenant=token' >"$work/auth/tenants"
echo 'admin' >"$work/auth/admin-token"
chart_config() {
  "$helm" template strata "$chart" "$@" --show-only templates/configmap.yaml |
    "$venv/bin/python" -c 'import sys, ruamel.yaml as y; print(y.YAML(typ="safe").load(sys.stdin)["data"]["stratad.yaml"])' |
    sed "s|/etc/strata/auth/|$work/auth/|"
}

check_dockerfile() { # FILE
  "$npmdir/node_modules/.bin/dockerfile-utils" lint "$1" || return 1
  local src
  for src in $(sed -n 's/^COPY \(--[^ ]* \)*\([^-][^ ]*\) .*/\2/p' "$1" | grep -v '^/'); do
    [ -e "$src" ] || { say "$1: COPY source $src does not exist"; return 1; }
  done
}

check_compose() { # FILE
  "$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$1"
}

check_chart() { # CHART VALUES_ARGS...
  local c=$1
  shift
  "$helm" lint --strict "$c" "$@" >"$work/lint.out" 2>&1 || { cat "$work/lint.out"; return 1; }
  "$helm" template strata "$c" "$@" >"$work/rendered.yaml" || return 1
  "$kubeconform" -strict -summary -kubernetes-version "${K8S_VERSION#v}" \
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$work/rendered.yaml"
}

check_unit() { # FILE
  local d="$work/unit"
  rm -rf "$d" && mkdir -p "$d"
  # verify checks that ExecStart's binary exists: point it at the one just built.
  sed "s|/usr/local/bin/stratad|$work/stratad|" "$1" >"$d/stratad.service"
  local out
  out=$(systemd-analyze verify "$d/stratad.service" 2>&1) || { say "$out"; return 1; }
  [ -z "$out" ] || { say "$out"; return 1; }
  systemd-analyze security --offline=yes --threshold=30 "$d/stratad.service" >"$work/security.out" 2>&1 ||
    { tail -3 "$work/security.out"; return 1; }
  grep 'Overall exposure' "$work/security.out"
}

# --- the checks ---
failed=()
run() { # NAME COMMAND...
  local name=$1
  shift
  say "== $name"
  if "$@"; then say "ok: $name"; else say "FAIL: $name"; failed+=("$name"); fi
}

chart=deploy/helm/strata
run "config deploy/stratad.yaml" check_config deploy/stratad.yaml
run "config deploy/compose/stratad.yaml" check_config deploy/compose/stratad.yaml
variants=("")
for v in "$chart"/ci/*-values.yaml; do variants+=("$v"); done
for v in "${variants[@]}"; do
  args=()
  [ -z "$v" ] || args=(-f "$v")
  label=${v:-default values}
  run "helm chart ($label)" check_chart "$chart" "${args[@]}"
  chart_config "${args[@]}" >"$work/chart-stratad.yaml"
  run "config of the chart ($label)" check_config "$work/chart-stratad.yaml"
done
run "Dockerfile" check_dockerfile deploy/docker/Dockerfile
run "compose" check_compose deploy/compose/compose.yaml
run "systemd unit" check_unit deploy/systemd/stratad.service

# --- each validator fails on a broken copy ---
broken="$work/broken"
mkdir -p "$broken"
must_fail() { # NAME COMMAND...
  local name=$1
  shift
  say "== must fail: $name"
  if "$@" >"$work/must-fail.out" 2>&1; then
    say "FAIL: the validator passed a broken input: $name"
    failed+=("must fail: $name")
  else
    local why
    why=$(grep -m1 -E 'not allowed|invalid|rror|Unknown|unknown|Failed|requires' "$work/must-fail.out" || head -1 "$work/must-fail.out")
    say "ok: refused: ${why:0:220}"
  fi
}
sed 's/^host-bytes:/host_bytes:/' deploy/stratad.yaml >"$broken/stratad.yaml"
must_fail "config with an unknown key" check_config "$broken/stratad.yaml"
sed 's/^ssd-sync: batch/ssd-sync: sometimes/' deploy/stratad.yaml >"$broken/stratad-value.yaml"
must_fail "config with a bad value" check_config "$broken/stratad-value.yaml"
sed 's/^RUN /RUNN /' deploy/docker/Dockerfile >"$broken/Dockerfile"
must_fail "Dockerfile with an unknown instruction" check_dockerfile "$broken/Dockerfile"
sed 's/^    hostname: strata-1/    hostnam: strata-1/' deploy/compose/compose.yaml >"$broken/compose.yaml"
must_fail "compose file with an unknown service key" check_compose "$broken/compose.yaml"
cp -r "$chart" "$broken/chart"
sed -i 's/^      serviceAccountName:/      serviceAcountName:/' "$broken/chart/templates/statefulset.yaml"
must_fail "chart with a misspelt pod field" check_chart "$broken/chart"
cp -r "$chart" "$broken/chart-tpl"
sed -i 's/{{ .Values.replicas }}/{{ .Values.replicas/' "$broken/chart-tpl/templates/statefulset.yaml"
must_fail "chart with a template syntax error" check_chart "$broken/chart-tpl"
must_fail "chart values with a misspelt key" check_chart "$chart" --set replica=3
chart_config_check_broken() {
  chart_config --set config.host-byte=1GiB >"$broken/chart-stratad.yaml" && check_config "$broken/chart-stratad.yaml"
}
must_fail "chart config with an unknown stratad key" chart_config_check_broken
sed 's/^ProtectSystem=strict/ProtectSystem=very/' deploy/systemd/stratad.service >"$broken/stratad.service"
must_fail "unit with a bad value" check_unit "$broken/stratad.service"
sed 's/^LimitMEMLOCK=/LimitMEMLOK=/' deploy/systemd/stratad.service >"$broken/stratad-key.service"
must_fail "unit with an unknown key" check_unit "$broken/stratad-key.service"

if [ ${#failed[@]} -gt 0 ]; then
  say "validate-deploy: ${#failed[@]} check(s) failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
say "validate-deploy: all checks passed"
