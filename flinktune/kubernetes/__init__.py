"""The Kubernetes side: FlinkDeployment bodies, CRD validation and the patch realizer.

Use :class:`KubernetesRealizer` as the decision loop's realizer on a cluster run by the Flink
Kubernetes Operator, :func:`deployment_body` to create a job, :func:`dry_run_diff` for dry runs.
"""

from flinktune.kubernetes.body import config_from_object, config_patch, deployment_body, dry_run_diff, is_in_place, merge_patch
from flinktune.kubernetes.crd import CRDSchema, CRDValidationError, load_crd_schema, validate_object
from flinktune.kubernetes.realizer import KubernetesRealizer, RealizeError

__all__ = [
    "CRDSchema",
    "CRDValidationError",
    "KubernetesRealizer",
    "RealizeError",
    "config_from_object",
    "config_patch",
    "deployment_body",
    "dry_run_diff",
    "is_in_place",
    "load_crd_schema",
    "merge_patch",
    "validate_object",
]
