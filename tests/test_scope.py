"""Scoping a query to one memory's graphs (pcm.scope): the same answers as the embedded store's union default graph
over that memory alone, and nothing of another memory's graphs, whatever the query tries."""

from __future__ import annotations

from collections import Counter

import pyoxigraph as ox
import pytest

from pcm.layout import LEGACY_LAYOUT, DatasetLayout, layout_of_graph
from pcm.scope import VIRTUOSO, Quirks, ScopeError, scope_query, strip_hidden

N = ox.NamedNode
EX = "http://example.org/"
A, B = DatasetLayout("aaaa"), DatasetLayout("bbbb")
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
TYPE = N("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")


def memory_quads(layout: DatasetLayout, who: str) -> list[ox.Quad]:
    """A small memory: an ontology graph, a conversation, two extraction graphs sharing an entity (so joins cross
    graphs and one triple is held twice) and a history graph."""
    e1, e2 = N(layout.extraction("p1")), N(layout.extraction("p2"))
    me, pet = N(EX + who), N(EX + who + "-pet")
    return [
        ox.Quad(N(EX + "Dog"), N(RDFS + "subClassOf"), N(EX + "Pet"), N(layout.ontology)),
        ox.Quad(N(EX + "Pet"), N(RDFS + "subClassOf"), N(EX + "Animal"), N(layout.ontology)),
        ox.Quad(N(EX + "post1"), N(EX + "content"), ox.Literal(f"{who} has a dog"), N(layout.conversation)),
        ox.Quad(me, N(EX + "hasPet"), pet, e1),
        ox.Quad(pet, TYPE, N(EX + "Dog"), e1),
        ox.Quad(pet, TYPE, N(EX + "Dog"), e2),  # said twice
        ox.Quad(pet, N(RDFS + "label"), ox.Literal(f"{who}'s secret dog"), e2),
        ox.Quad(pet, N(EX + "age"), ox.Literal("3", datatype=N("http://www.w3.org/2001/XMLSchema#integer")), e2),
        ox.Quad(N(EX + "old"), N(EX + "said"), ox.Literal(f"{who} once had a cat"), N(layout.history)),
    ]


@pytest.fixture(scope="module")
def stores() -> tuple[ox.Store, ox.Store]:
    """The shared store (two memories) and memory A alone, as an embedded store holds it."""
    shared, alone = ox.Store(), ox.Store()
    shared.extend(memory_quads(A, "ann") + memory_quads(B, "bob"))
    shared.add(ox.Quad(N(EX + "bob"), N(EX + "inDefault"), ox.Literal("default graph"), ox.DefaultGraph()))
    alone.extend(memory_quads(A, "ann"))
    return shared, alone


def _answer(result: object) -> object:
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    if isinstance(result, ox.QuerySolutions):
        variables = tuple(v.value for v in result.variables)
        keep = strip_hidden(variables) or list(range(len(variables)))
        return Counter(tuple(str(row[k]) for k in keep) for row in result)
    return Counter(str(t) for t in result)  # type: ignore[attr-defined]


PREFIXES = f"PREFIX ex: <{EX}> PREFIX rdfs: <{RDFS}>\n"
SAME_ANSWER = [
    "SELECT * WHERE { ?s ?p ?o }",
    "SELECT ?pet ?label WHERE { ex:ann ex:hasPet ?pet . ?pet a ex:Dog ; rdfs:label ?label }",  # a join across graphs
    "SELECT ?pet (COUNT(*) AS ?n) WHERE { ?pet a ex:Dog } GROUP BY ?pet",  # a triple held twice counts twice
    "SELECT ?c WHERE { ?pet a/rdfs:subClassOf* ?c }",  # a sequence path crossing graphs
    "SELECT ?x WHERE { ?x ^ex:hasPet ?owner . ?x rdfs:label|ex:age ?v }",
    "SELECT ?o WHERE { ex:ann ex:hasPet [ rdfs:label ?o ] }",
    "SELECT ?s WHERE { ?s a ex:Dog OPTIONAL { ?s ex:age ?age } FILTER NOT EXISTS { ?s ex:missing ?m } }",
    "SELECT ?s WHERE { { ?s a ex:Dog } UNION { ?s ex:said ?t } MINUS { ?s ex:age 4 } }",
    "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g",
    "SELECT ?n WHERE { { SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s ?p ?o } } }",
    "SELECT ?s WHERE { VALUES ?s { ex:ann-pet ex:bob-pet } ?s ex:age ?a FILTER(?a > 2) }",
    "SELECT ?t WHERE { ?s ex:content ?t FILTER(CONTAINS(?t, \"dog\")) }",
    "ASK { ex:ann ex:hasPet ?p }",
    "ASK { ex:bob ex:hasPet ?p }",
    "CONSTRUCT { ?s ex:knownAs ?l } WHERE { ?s rdfs:label ?l }",
    "CONSTRUCT WHERE { ?s ex:age ?a }",
]


@pytest.mark.parametrize("query", SAME_ANSWER)
def test_a_scoped_query_answers_as_the_memory_alone_on_an_embedded_store(stores: tuple[ox.Store, ox.Store], query: str) -> None:
    shared, alone = stores
    expected = _answer(alone.query(PREFIXES + query, use_default_graph_as_union=True))
    scoped = scope_query(PREFIXES + query, A.prefix)
    assert _answer(shared.query(scoped)) == expected
    assert _answer(shared.query(scoped, use_default_graph_as_union=True)) == expected  # the rewrite needs no union


SEE_NOTHING_OF_B = [
    "SELECT ?g WHERE { GRAPH ?g { } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }",
    "SELECT ?o WHERE { VALUES ?g { <urn:pcm:memory:bbbb:graph:conversation> } GRAPH ?g { ?s ?p ?o } }",
    "SELECT ?o WHERE { BIND(<urn:pcm:memory:bbbb:graph:extraction:p2> AS ?g) GRAPH ?g { ?s ?p ?o } }",
    "SELECT ?o WHERE { ?s ?p ?o FILTER(CONTAINS(STR(?o), \"bob\")) }",
    "SELECT ?o WHERE { ?s ?p ?o }",
    "SELECT ?o WHERE { OPTIONAL { GRAPH ?g { ?s ?p ?o } } }",
    "SELECT ?o WHERE { FILTER EXISTS { GRAPH ?g { ?s ?p ?o } } ?s ?p ?o }",
    "SELECT (EXISTS { ex:bob ex:hasPet ?x } AS ?b) WHERE { }",
]


@pytest.mark.parametrize("query", SEE_NOTHING_OF_B)
def test_hostile_queries_see_nothing_of_another_memory(stores: tuple[ox.Store, ox.Store], query: str) -> None:
    shared, _ = stores
    result = shared.query(scope_query(PREFIXES + query, A.prefix), use_default_graph_as_union=True)
    text = " ".join(str(row) for row in result) if not isinstance(result, ox.QueryBoolean) else str(result)
    assert "bob" not in text and "bbbb" not in text and "default graph" not in text


REFUSED = [
    "SELECT * WHERE { GRAPH <urn:pcm:memory:bbbb:graph:conversation> { ?s ?p ?o } }",
    "SELECT * FROM <urn:pcm:memory:bbbb:graph:extraction:p2> WHERE { ?s ?p ?o }",
    "SELECT * FROM NAMED <urn:pcm:memory:bbbb:graph:extraction:p2> WHERE { GRAPH ?g { ?s ?p ?o } }",
    "PREFIX b: <urn:pcm:memory:bbbb:graph:> SELECT * WHERE { GRAPH b:history { ?s ?p ?o } }",
    "BASE <urn:pcm:memory:bbbb:graph:> SELECT * WHERE { GRAPH <history> { ?s ?p ?o } }",
    "SELECT * WHERE { GRAPH <urn:pcm:memory:aaaa:graph:x\\u003E> { ?s ?p ?o } }",
    "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }",
    "SELECT ?__pcm_g1 WHERE { ?s ?p ?o BIND(<urn:x> AS ?__pcm_g1) }",
    "DESCRIBE ex:bob",
    "SELECT * WHERE { GRAPH <urn:pcm:graph:conversation> { ?s ?p ?o } }",  # the fixed names are another memory's
]


@pytest.mark.parametrize("query", REFUSED)
def test_queries_naming_other_graphs_are_refused(query: str) -> None:
    with pytest.raises(ScopeError):
        scope_query(PREFIXES + query, A.prefix)


def test_own_graphs_may_be_named() -> None:
    query = f"SELECT * FROM <{A.conversation}> FROM NAMED <{A.history}> WHERE {{ ?s ?p ?o GRAPH ?g {{ ?x ?y ?z }} }}"
    scoped = scope_query(query, A.prefix)
    assert "FROM <urn:pcm:memory:aaaa:graph:conversation>" in scoped
    assert "?s ?p ?o" in scoped  # the query's own dataset: its default graph is that one graph, left as written


def test_the_layout_names_and_renders_graphs() -> None:
    assert LEGACY_LAYOUT.conversation == "urn:pcm:graph:conversation"
    assert A.conversation == "urn:pcm:memory:aaaa:graph:conversation" and A.owns(A.extraction("p1"))
    assert not A.owns(B.conversation) and not A.owns(LEGACY_LAYOUT.conversation)
    assert A.render("GRAPH {{graph:history}} {} FILTER(STRSTARTS(STR(?g), {{prefix:extraction}}))") == (
        'GRAPH <urn:pcm:memory:aaaa:graph:history> {} FILTER(STRSTARTS(STR(?g), "urn:pcm:memory:aaaa:graph:extraction:"))'
    )
    assert layout_of_graph(B.import_graph("x")) == B and layout_of_graph(LEGACY_LAYOUT.history) == LEGACY_LAYOUT
    assert layout_of_graph("urn:other") is None
    assert A.rehome(LEGACY_LAYOUT.extraction("p9"), LEGACY_LAYOUT) == A.extraction("p9")
    with pytest.raises(KeyError):
        A.render("{{graph:nowhere}}")
    with pytest.raises(ValueError):
        DatasetLayout("a:b")


WITHOUT_ZERO_LENGTH = [
    "SELECT ?x WHERE { ?x a/rdfs:subClassOf* ex:Pet }",  # the pattern: the zero-length step finds ex:Dog
    "SELECT ?x ?c WHERE { ?x a ?c . ?c rdfs:subClassOf* ex:Pet }",  # the variable end is the query's: bound
    "SELECT ?c WHERE { ?c rdfs:subClassOf? ex:Pet }",
    "SELECT ?c WHERE { ex:Dog (rdfs:subClassOf|ex:none)* ?c }",
    "SELECT ?x WHERE { ?x ^(ex:hasPet/a?) ?o }",
    "ASK { ex:Dog rdfs:subClassOf* ex:Dog }",
    "ASK { ex:Dog rdfs:subClassOf* ex:Animal }",
    "ASK { ex:Animal rdfs:subClassOf* ex:Dog }",
    "SELECT ?pet WHERE { ex:ann ex:hasPet ?pet . ?pet a/(rdfs:subClassOf/rdfs:subClassOf?) ex:Animal }",
]


@pytest.mark.parametrize("query", WITHOUT_ZERO_LENGTH)
def test_paths_written_without_zero_length_give_the_same_answer(stores: tuple[ox.Store, ox.Store], query: str) -> None:
    """The rewrite for engines that drop zero-length matches inside GRAPH ?g (Virtuoso) keeps the answers."""
    shared, alone = stores
    text = PREFIXES + query
    scoped = scope_query(text, A.prefix, zero_length=False)
    assert "*" not in scoped.replace("SELECT *", "") and "?" + " " not in scoped
    expected = _answer(alone.query(text, use_default_graph_as_union=True))
    assert _answer(shared.query(scoped, use_default_graph_as_union=True)) == expected, scoped


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SELECT * WHERE { ?a rdfs:subClassOf* ?b }", "between two variables"),
        ("SELECT * WHERE { ?a (rdfs:subClassOf*)+ ex:Pet }", "repeats a path that holds"),
        ("SELECT * WHERE { GRAPH ?g { ?a rdfs:subClassOf* ex:Pet } }", "inside GRAPH"),
    ],
)
def test_what_cannot_be_written_without_zero_length_is_refused_in_one_line(query: str, says: str) -> None:
    with pytest.raises(ScopeError, match=says) as caught:
        scope_query(PREFIXES + query, A.prefix, zero_length=False)
    assert "\n" not in str(caught.value)


OPTIONAL_FILTERS = [
    "SELECT ?pet WHERE { ?me ex:hasPet ?pet OPTIONAL { ?pet rdfs:label ?l FILTER(?me != ?pet) } }",
    "SELECT ?l WHERE { ?me ex:hasPet ?pet OPTIONAL { ?pet rdfs:label ?l FILTER(CONTAINS(STR(?me), 'ann')) } }",
    "ASK { ?me ex:hasPet ?pet OPTIONAL { ?pet rdfs:label ?l FILTER(?me = ?pet) } }",
    "SELECT (COUNT(?l) AS ?n) WHERE { ?me ex:hasPet ?pet OPTIONAL { ?pet rdfs:label ?l FILTER(BOUND(?me)) } }",
    "SELECT ?x WHERE { { SELECT ?x WHERE { ?x a ?c OPTIONAL { ?c rdfs:subClassOf ?d FILTER(?x != ?d) } } } }",
]


@pytest.mark.parametrize("query", OPTIONAL_FILTERS)
def test_a_group_with_a_filter_inside_optional_projects_every_variable(
    stores: tuple[ox.Store, ox.Store], query: str
) -> None:
    """Virtuoso hides from a FILTER inside OPTIONAL the outer variables the query does not project: the group goes
    into ``SELECT *``, the same answers on a standard engine."""
    shared, alone = stores
    text = PREFIXES + query
    scoped = scope_query(text, A.prefix, quirks=Quirks(optional_filter_scope=False))
    assert "SELECT * WHERE" in scoped
    expected = _answer(alone.query(text, use_default_graph_as_union=True))
    assert _answer(shared.query(scoped, use_default_graph_as_union=True)) == expected, scoped
    assert "SELECT * WHERE" not in scope_query(PREFIXES + "SELECT ?x WHERE { ?x a ?c OPTIONAL { ?x ?p ?o } }", A.prefix,
                                               quirks=Quirks(optional_filter_scope=False))


def test_a_walk_on_virtuoso_is_a_transitive_subquery_over_the_memory_graphs() -> None:
    """Virtuoso walks a `+` path inside GRAPH ?g through every graph of the server: each step of the walk is read
    from this memory's graphs (the differential suite runs these on Virtuoso itself)."""
    scoped = scope_query(PREFIXES + "SELECT ?x WHERE { ?x a/rdfs:subClassOf* ex:Pet }", A.prefix, quirks=VIRTUOSO)
    assert "OPTION (TRANSITIVE" in scoped and "rdfs:subClassOf+" not in scoped
    walked = scoped[scoped.index("OPTION (TRANSITIVE") - 200 :]
    assert 'FILTER(STRSTARTS(STR(?__pcm_g' in walked and A.prefix in walked
    inverse = scope_query(PREFIXES + "SELECT ?x WHERE { ex:Pet (^rdfs:subClassOf|ex:p)+ ?x }", A.prefix, quirks=VIRTUOSO)
    assert "^rdfs:subClassOf" not in inverse and "?x rdfs:subClassOf" not in inverse  # the inverse step turned round


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SELECT * WHERE { ?a rdfs:subClassOf+ ?b }", "only from a fixed end"),
        ("SELECT * WHERE { ex:Dog ex:p/rdfs:subClassOf+ ?b }", "only from a fixed end"),
        ("SELECT * WHERE { GRAPH ?g { ex:Dog rdfs:subClassOf+ ?c } }", "through every graph"),
        ("SELECT * WHERE { ex:Dog (rdfs:subClassOf+/ex:p)+ ?c }", "repeated inside another"),
    ],
)
def test_what_virtuoso_cannot_walk_in_the_memory_is_refused_in_one_line(query: str, says: str) -> None:
    with pytest.raises(ScopeError, match=says) as caught:
        scope_query(PREFIXES + query, A.prefix, quirks=VIRTUOSO)
    assert "\n" not in str(caught.value)
