DELETE WHERE { GRAPH {{graph:provenance}} { {{post}} <https://w3id.org/pcm/ontology#unknownTerm> ?t } }
