"""pcm's version and the version of its on-disk layout.

A module of its own, below everything, so that :mod:`pcm.manifest` can stamp both into ``memory.toml`` without
importing the root package, whose ``from pcm import Memory`` reaches up to the facade.
"""

__version__ = "0.1.0"

#: Version of the on-disk memory layout. A memory written with a newer schema version is refused.
SCHEMA_VERSION = 1
