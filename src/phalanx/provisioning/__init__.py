"""Node pools bought for pending gangs: the provider interface (``base``) and providers.

Import providers by module (``phalanx.provisioning.local``): this package imports none of
them, so the simulator can use ``base`` without the compute planes.
"""
