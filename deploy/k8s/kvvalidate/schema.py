"""Each object against the Kubernetes client's model for its kind.

`kubectl kustomize` accepts any YAML and `kubectl apply` finds a mistake
only against a live API server, so the official Python client's generated
models stand in for the API's schema: unknown fields at any depth (inside
lists and typed maps too), wrong types, missing required fields (those
whose setter refuses None), and the enumerated values, IntOrString fields
and resource quantities that the models type loosely but the API server
would reject.
"""

import inspect
import re

from kubernetes import client as k8s

from .report import suggest, tname

# apiVersion -> kinds checked; each maps to the client's V1<Kind> model.
KINDS = {
    "v1": {"ConfigMap", "Secret", "Service", "ServiceAccount", "Namespace",
           "PersistentVolumeClaim", "Pod", "LimitRange", "ResourceQuota"},
    "apps/v1": {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"},
    "batch/v1": {"Job", "CronJob"},
    "policy/v1": {"PodDisruptionBudget"},
    "networking.k8s.io/v1": {"NetworkPolicy", "Ingress"},
    "rbac.authorization.k8s.io/v1": {"Role", "RoleBinding", "ClusterRole",
                                     "ClusterRoleBinding"},
}

# Enumerated string fields (model class, attribute) -> allowed values. The
# generated models do not check these; the API server would.
PROTOCOLS = {"TCP", "UDP", "SCTP"}
ENUMS = {
    ("V1ContainerPort", "protocol"): PROTOCOLS,
    ("V1ServicePort", "protocol"): PROTOCOLS,
    ("V1NetworkPolicyPort", "protocol"): PROTOCOLS,
    ("V1Container", "image_pull_policy"): {"Always", "Never", "IfNotPresent"},
    ("V1PodSpec", "restart_policy"): {"Always", "OnFailure", "Never"},
    ("V1DeploymentStrategy", "type"): {"Recreate", "RollingUpdate"},
    ("V1StatefulSetSpec", "pod_management_policy"): {"OrderedReady",
                                                     "Parallel"},
    ("V1StatefulSetUpdateStrategy", "type"): {"RollingUpdate", "OnDelete"},
    ("V1ServiceSpec", "type"): {"ClusterIP", "NodePort", "LoadBalancer",
                                "ExternalName"},
    ("V1NetworkPolicySpec", "policy_types"): {"Ingress", "Egress"},
    ("V1PersistentVolumeClaimSpec", "access_modes"): {
        "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"},
    ("V1PodSecurityContext", "fs_group_change_policy"): {"OnRootMismatch",
                                                         "Always"},
    ("V1SeccompProfile", "type"): {"RuntimeDefault", "Unconfined",
                                   "Localhost"},
    ("V1LabelSelectorRequirement", "operator"): {"In", "NotIn", "Exists",
                                                 "DoesNotExist"},
    ("V1HTTPGetAction", "scheme"): {"HTTP", "HTTPS"},
}

# Fields the models type as `object` that are IntOrString in the API.
INT_OR_STRING = {
    ("V1ServicePort", "target_port"), ("V1NetworkPolicyPort", "port"),
    ("V1HTTPGetAction", "port"), ("V1TCPSocketAction", "port"),
    ("V1PodDisruptionBudgetSpec", "max_unavailable"),
    ("V1PodDisruptionBudgetSpec", "min_available"),
    ("V1RollingUpdateDeployment", "max_surge"),
    ("V1RollingUpdateDeployment", "max_unavailable"),
}

# Resource quantities: strings in the models, numbers allowed by the API.
QUANTITIES = {("V1ResourceRequirements", "limits"),
              ("V1ResourceRequirements", "requests"),
              ("V1EmptyDirVolumeSource", "size_limit")}
QUANTITY_RE = re.compile(
    r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")

# model class -> its required attributes, found once per class.
_required = {}


def required_attrs(cls):
    """Attributes whose setter refuses None: the model's required fields."""
    if cls not in _required:
        req = set()
        for attr in cls.openapi_types:
            prop = getattr(cls, attr, None)
            fset = getattr(prop, "fset", None)
            if fset is not None and \
                    "must not be `None`" in inspect.getsource(fset):
                req.add(attr)
        _required[cls] = req
    return _required[cls]


def model_class(name):
    return getattr(k8s, name, None)


def check_value(rep, where, path, typ, value, owner, attr):
    """Checks value against the client type string typ ('list[V1Container]',
    'dict(str, str)', 'int', 'V1Probe', ...)."""
    if value is None:
        return
    if typ.startswith("list["):
        if not isinstance(value, list):
            rep.err(where, f"{path}: expected a list, got {tname(value)}")
            return
        for i, item in enumerate(value):
            if item is None:
                rep.err(where, f"{path}[{i}]: null list item")
                continue
            check_value(rep, where, f"{path}[{i}]", typ[5:-1], item, owner,
                        attr)
        return
    m = re.match(r"^dict\(([^,]+), (.*)\)$", typ)
    if m:
        if not isinstance(value, dict):
            rep.err(where, f"{path}: expected a map, got {tname(value)}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                rep.err(where, f"{path}: key {k!r} is not a string")
                continue
            check_value(rep, where, f'{path}["{k}"]', m.group(2), v, owner,
                        attr)
        return
    key = (owner.__name__ if owner else "", attr)
    if key in QUANTITIES:
        if isinstance(value, bool) or \
                not isinstance(value, (str, int, float)) or \
                not QUANTITY_RE.match(str(value)):
            rep.err(where, f"{path}: {value!r} is not a resource quantity")
        return
    if typ == "str":
        if not isinstance(value, str):
            rep.err(where, f"{path}: expected a string, got {tname(value)} "
                    f"({value!r})")
        elif key in ENUMS and value not in ENUMS[key]:
            rep.err(where, f"{path}: {value!r} is not one of "
                    f"{', '.join(sorted(ENUMS[key]))}"
                    f"{suggest(value, ENUMS[key])}")
        return
    if typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            rep.err(where, f"{path}: expected an integer, got {tname(value)} "
                    f"({value!r})")
        return
    if typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            rep.err(where, f"{path}: expected a number, got {tname(value)}")
        return
    if typ == "bool":
        if not isinstance(value, bool):
            rep.err(where, f"{path}: expected a boolean, got {tname(value)} "
                    f"({value!r})")
        return
    if typ in ("datetime", "date"):
        if not isinstance(value, str):
            rep.err(where, f"{path}: expected a timestamp string")
        return
    if typ == "object":
        if key in INT_OR_STRING and (isinstance(value, bool) or
                                     not isinstance(value, (int, str))):
            rep.err(where, f"{path}: expected an integer or a string, got "
                    f"{tname(value)}")
        return
    cls = model_class(typ)
    if cls is None:
        rep.err(where, f"{path}: no model for type {typ}")
        return
    check_model(rep, where, path, cls, value)


def check_model(rep, where, path, cls, value):
    if not isinstance(value, dict):
        rep.err(where, f"{path or '.'}: expected an object, got "
                f"{tname(value)}")
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for key, v in value.items():
        attr = by_json.get(key)
        here = f"{path}.{key}" if path else key
        if attr is None:
            rep.err(where, f"{here}: unknown field{suggest(key, by_json)}")
            continue
        check_value(rep, where, here, cls.openapi_types[attr], v, cls, attr)
    for attr in sorted(required_attrs(cls)):
        key = cls.attribute_map[attr]
        if value.get(key) is None:
            here = f"{path}.{key}" if path else key
            rep.err(where, f"{here}: required field is missing")
