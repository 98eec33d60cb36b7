"""pcm: a personal conversational memory on RDF.

Every remembered fact is typed by the PCM ontology, validated with SHACL, stored in Oxigraph and traceable
through PROV-O to the utterance it came from.
"""

__version__ = "0.1.0"

#: Version of the on-disk memory layout. A memory written with a newer schema version is refused.
SCHEMA_VERSION = 1
