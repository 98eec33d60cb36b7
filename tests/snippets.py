"""Turtle that several test modules write into a memory or an ontology: one copy each."""

#: The owner's home and employer before a move (Portland, Harbor Analytics) and after it (Seattle, Cascade Health).
PORTLAND = """m:owner schema:homeLocation m:portland ; schema:worksFor m:harbor-analytics .
m:portland a schema:City ; rdfs:label "Portland" .
m:harbor-analytics a schema:Organization ; rdfs:label "Harbor Analytics" ."""
SEATTLE = """m:owner schema:homeLocation m:seattle ; schema:worksFor m:cascade-health .
m:seattle a schema:City ; rdfs:label "Seattle" .
m:cascade-health a schema:Organization ; rdfs:label "Cascade Health" ."""

#: A property of the shipped ontology that an ontology change removes.
BREED = """pcm:petBreed a owl:DatatypeProperty, owl:FunctionalProperty ;
    rdfs:label "pet breed" ;
    rdfs:comment "Breed, if known." ;
    rdfs:domain pcm:Pet ;
    rdfs:range xsd:string ;
    pcm:area "pets" .
"""
