"""The node doctor and its checks: GPU (NVML), host and site checks, aggregated into health.

Below the compute planes, which run the doctor (the local plane) or report what it
found (the Kubernetes plane reads what each node's doctor wrote on its Node).
"""

from phalanx.health.checks import Check, result
from phalanx.health.doctor import Doctor, Report, default_checks, health_of, make_doctor

__all__ = ["Check", "Doctor", "Report", "default_checks", "health_of", "make_doctor",
           "result"]
