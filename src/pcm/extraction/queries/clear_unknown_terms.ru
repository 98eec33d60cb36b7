DELETE WHERE { GRAPH <urn:pcm:graph:provenance> { {{post}} <https://w3id.org/pcm/ontology#unknownTerm> ?t } }
