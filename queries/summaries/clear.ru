# Drop one session's summary ({{session}}) and its summary activity ({{activity}}), before a rewrite or for good.
DELETE WHERE { GRAPH {{graph:conversation}} { {{session}} <https://w3id.org/pcm/ontology#summary> ?s } } ;
DELETE WHERE { GRAPH {{graph:provenance}} { {{activity}} ?p ?o } }
