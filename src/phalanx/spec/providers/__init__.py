"""Node-pool providers, one declaration each (``ProviderInfo``, ``base.py``): the built-in
ones are declared here, one module each; a provider elsewhere declares itself in its own
module with ``register_provider``."""

from phalanx.spec.providers import kubernetes, local, simulated
from phalanx.spec.providers.base import (
    OptionCheck,
    ProviderInfo,
    provider_info,
    providers,
    register_provider,
)

# In the order the API's schema lists them.
BUILTIN = (local.LOCAL, kubernetes.PROVISIONING_REQUEST, simulated.SIMULATED)

__all__ = ["BUILTIN", "OptionCheck", "ProviderInfo", "provider_info", "providers",
           "register_provider"]
