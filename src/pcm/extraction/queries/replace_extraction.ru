DELETE { GRAPH {{graph:provenance}} { ?act ?ap ?ao } }
WHERE { GRAPH {{graph:provenance}} { {{graph}} <http://www.w3.org/ns/prov#wasGeneratedBy> ?act . ?act ?ap ?ao } } ;
DELETE WHERE { GRAPH {{graph:provenance}} { {{graph}} ?p ?o } } ;
DROP SILENT GRAPH {{graph}}
