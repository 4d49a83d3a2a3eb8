"""The conformance catalogue (reference §2) written with the model API: the registry `soklet serve --fixtures
conformance` serves, so the model tests exercise exactly what the server registers."""

from soklet_apps.conformance import JSON_SCHEMA_2020_12, build_registry

__all__ = ["JSON_SCHEMA_2020_12", "build_registry"]
