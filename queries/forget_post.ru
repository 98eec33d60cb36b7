# Forget one utterance: the post, its status, its extraction graph and that graph's provenance metadata.
# Facts another utterance also supports live in that utterance's own graph and stay.
PREFIX prov: <http://www.w3.org/ns/prov#>
DELETE WHERE { GRAPH {{graph:conversation}} { {{post}} ?p ?o } } ;
DELETE WHERE { GRAPH {{graph:conversation}} { ?s ?p {{post}} } } ;
DELETE WHERE { GRAPH {{graph:provenance}} { {{post}} ?p ?o } } ;
DELETE { GRAPH {{graph:provenance}} { ?act ?ap ?ao } }
WHERE { GRAPH {{graph:provenance}} { {{graph}} prov:wasGeneratedBy ?act . ?act ?ap ?ao } } ;
DELETE WHERE { GRAPH {{graph:provenance}} { {{graph}} ?p ?o } } ;
DROP SILENT GRAPH {{graph}}
