from tests.sdk.http_recorder import recorder

__all__ = ["recorder"]
