"""The user-facing schema: typed, strict, camelCase on the wire.

The names below load on first use: importing one module of the spec (``phalanx.spec.status``
for a job's record) runs this package first, and should not pay for every model of the
spec (the queue configuration, the manifests' translations) that it does not use.
"""

from typing import TYPE_CHECKING

from phalanx.lazy import lazy_names

if TYPE_CHECKING:
    from phalanx.spec.base import Model, spec_error_from, validate
    from phalanx.spec.config import (
        CONFIG_KINDS,
        QueueConfig,
        load_config_yaml,
        load_job_yaml,
        load_jobs_yaml,
        parse_config_documents,
    )
    from phalanx.spec.quantity import (
        format_amount,
        format_duration,
        format_quantity,
        parse_duration,
        parse_quantity,
    )
    from phalanx.spec.resources import (
        BUILTIN_PRIORITY_CLASSES,
        GPU,
        BorrowWithinCohort,
        ClusterQueue,
        Cohort,
        ConfigObject,
        FairSharing,
        FlavorFungibility,
        FlavorQuotas,
        JobKind,
        JobSpec,
        LocalQueue,
        Node,
        NodeHealth,
        PodSet,
        PreemptionPolicy,
        PriorityClass,
        ResourceFlavor,
        ResourceGroup,
        ResourceQuota,
        RestartPolicy,
        Taint,
        Toleration,
        TopologyConstraint,
        tolerates_all,
    )

# Where each lazily loaded name lives; the TYPE_CHECKING imports above must match.
_HOMES = {
    "BUILTIN_PRIORITY_CLASSES": "phalanx.spec.resources",
    "BorrowWithinCohort": "phalanx.spec.resources",
    "CONFIG_KINDS": "phalanx.spec.config",
    "ClusterQueue": "phalanx.spec.resources",
    "Cohort": "phalanx.spec.resources",
    "ConfigObject": "phalanx.spec.resources",
    "FairSharing": "phalanx.spec.resources",
    "FlavorFungibility": "phalanx.spec.resources",
    "FlavorQuotas": "phalanx.spec.resources",
    "GPU": "phalanx.spec.resources",
    "JobKind": "phalanx.spec.resources",
    "JobSpec": "phalanx.spec.resources",
    "LocalQueue": "phalanx.spec.resources",
    "Model": "phalanx.spec.base",
    "Node": "phalanx.spec.resources",
    "NodeHealth": "phalanx.spec.resources",
    "PodSet": "phalanx.spec.resources",
    "PreemptionPolicy": "phalanx.spec.resources",
    "PriorityClass": "phalanx.spec.resources",
    "QueueConfig": "phalanx.spec.config",
    "ResourceFlavor": "phalanx.spec.resources",
    "ResourceGroup": "phalanx.spec.resources",
    "ResourceQuota": "phalanx.spec.resources",
    "RestartPolicy": "phalanx.spec.resources",
    "Taint": "phalanx.spec.resources",
    "Toleration": "phalanx.spec.resources",
    "TopologyConstraint": "phalanx.spec.resources",
    "format_amount": "phalanx.spec.quantity",
    "format_duration": "phalanx.spec.quantity",
    "format_quantity": "phalanx.spec.quantity",
    "load_config_yaml": "phalanx.spec.config",
    "load_job_yaml": "phalanx.spec.config",
    "load_jobs_yaml": "phalanx.spec.config",
    "parse_config_documents": "phalanx.spec.config",
    "parse_duration": "phalanx.spec.quantity",
    "parse_quantity": "phalanx.spec.quantity",
    "spec_error_from": "phalanx.spec.base",
    "tolerates_all": "phalanx.spec.resources",
    "validate": "phalanx.spec.base",
}

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "CONFIG_KINDS",
    "GPU",
    "BorrowWithinCohort",
    "ClusterQueue",
    "Cohort",
    "ConfigObject",
    "FairSharing",
    "FlavorFungibility",
    "FlavorQuotas",
    "JobKind",
    "JobSpec",
    "LocalQueue",
    "Model",
    "Node",
    "NodeHealth",
    "PodSet",
    "PreemptionPolicy",
    "PriorityClass",
    "QueueConfig",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "RestartPolicy",
    "Taint",
    "Toleration",
    "TopologyConstraint",
    "format_amount",
    "format_duration",
    "format_quantity",
    "load_config_yaml",
    "load_job_yaml",
    "load_jobs_yaml",
    "parse_config_documents",
    "parse_duration",
    "parse_quantity",
    "spec_error_from",
    "tolerates_all",
    "validate",
]


# Hidden from type checkers, as in ``phalanx/__init__.py``: they see the real names
# through the TYPE_CHECKING imports.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, _HOMES, globals(), __all__)
