#!/usr/bin/env python3
"""Writes kubeconform's JSON schemas, strict and standalone, from OpenAPI
definitions that ship in Go modules (scripts/validate-deploy.sh fetches them
with `go mod download`), so that `kubeconform -strict` runs offline.

    kube-schemas.py OUT_DIR SWAGGER_JSON [CRD_JSON...]

SWAGGER_JSON is Kubernetes' api/openapi-spec/swagger.json (module
k8s.io/kubernetes); each CRD_JSON a CustomResourceDefinition as JSON (e.g.
prometheus-operator's jsonnet/prometheus-operator/servicemonitors-crd.json).
Files are named as kubeconform's default location names them:
<kind>[-<first label of the group>]-<version>.json, lowercase, so that
`-schema-location 'OUT_DIR/{{ .ResourceKind }}{{ .KindSuffix }}.json'` finds
them.

"Strict" is what kubeconform's -strict expects of its schemas: every object
with declared properties refuses others (additionalProperties: false), as
the schemas of yannh/kubernetes-json-schema's *-strict folders do.
Kubernetes' int-or-string fields and resource quantities take a string or a
number. Recursive references (only JSONSchemaProps has them) become {}.
"""
import json
import os
import sys

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def strict(schema):
    """Tightens a resolved schema in place as kubeconform's strict schemas are."""
    if isinstance(schema, list):
        for s in schema:
            strict(s)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("format") == "int-or-string" or schema.get("x-kubernetes-int-or-string"):
        for k in ("type", "format"):
            schema.pop(k, None)
        schema["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    if "properties" in schema and "additionalProperties" not in schema \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        schema["additionalProperties"] = False
    for k, v in list(schema.items()):
        if k == "properties":
            for p in v.values():
                strict(p)
        elif k in ("items", "additionalProperties", "allOf", "anyOf", "oneOf", "not"):
            strict(v)


def resolve(schema, defs, stack):
    """Inlines every $ref of schema, from defs."""
    if isinstance(schema, list):
        return [resolve(s, defs, stack) for s in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.split("/")[-1]
        if name in stack:
            return {}
        if name == QUANTITY:
            return {"oneOf": [{"type": "string"}, {"type": "number"}]}
        return resolve(defs[name], defs, stack | {name})
    return {k: resolve(v, defs, stack) for k, v in schema.items()}


def filename(group, version, kind):
    suffix = "-" + group.split(".")[0] if group else ""
    return f"{kind.lower()}{suffix}-{version}.json"


def write(out, name, schema, group, version, kind):
    schema = dict(schema)
    schema["$schema"] = "http://json-schema.org/schema#"
    api = f"{group}/{version}" if group else version
    props = dict(schema.get("properties", {}))
    props["apiVersion"] = {"type": "string", "enum": [api]}
    props["kind"] = {"type": "string", "enum": [kind]}
    schema["properties"] = props
    with open(os.path.join(out, name), "w") as f:
        json.dump(schema, f)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out, swagger, crds = argv[1], argv[2], argv[3:]
    os.makedirs(out, exist_ok=True)
    defs = json.load(open(swagger))["definitions"]
    n = 0
    for name, d in defs.items():
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            if name.endswith("List") or gvk["kind"].endswith("List"):
                continue
            s = resolve(d, defs, frozenset([name]))
            strict(s)
            write(out, filename(gvk["group"], gvk["version"], gvk["kind"]), s, gvk["group"], gvk["version"], gvk["kind"])
            n += 1
    for path in crds:
        crd = json.load(open(path))
        spec = crd["spec"]
        for v in spec["versions"]:
            s = v["schema"]["openAPIV3Schema"]
            strict(s)
            write(out, filename(spec["group"], v["name"], spec["names"]["kind"]), s,
                  spec["group"], v["name"], spec["names"]["kind"])
            n += 1
    print(f"kube-schemas: {n} schemas in {out}")


if __name__ == "__main__":
    main(sys.argv)
