"""Scope a SPARQL query to one memory's graphs, for a store that other memories may share (docs/DESIGN.md §3).

Every graph of a memory starts with one prefix (:attr:`pcm.layout.DatasetLayout.prefix`). A query is rewritten so
that it can read nothing else, whoever wrote it (pcm itself, ``ask``'s generator, a person at ``pcm sparql``):

* a triple pattern on the default graph becomes ``GRAPH ?__pcm_gN { s p o }`` with a filter on the prefix of
  ``?__pcm_gN``, one graph variable per pattern. That is what the embedded store's union default graph means
  (``use_default_graph_as_union``: a join may take its triples from different graphs, and a triple held by two
  graphs matches twice there too), so answers are the same on both. A top-level sequence path (``a/rdfs:subClassOf*``)
  is split into its steps, so its steps may come from different graphs as well. A ``*``, ``+`` or ``?`` step gives
  each pair once over the union, so it becomes a ``SELECT DISTINCT`` over the graphs (evaluated without the
  bindings around it: slower than inline when both ends are variables), and it is walked within one graph (the one
  departure from the union: pcm's closures run over the ontology graph, which holds them whole); on an engine
  with :class:`Quirks` the paths, and a FILTER inside OPTIONAL, are written around what it gets wrong;
* ``GRAPH ?g { ... }`` gets the same filter on ``?g``; ``GRAPH <iri>``, ``FROM`` and ``FROM NAMED`` must name
  this memory's graphs (a query with ``FROM`` keeps its own dataset, so its default-graph patterns are left as
  written); ``SERVICE`` and ``DESCRIBE`` (whose answer the server draws from its whole store) are refused.

The protocol's ``default-graph-uri`` / ``named-graph-uri`` parameters would need every graph of the memory listed
in every request: one graph per utterance makes that thousands of IRIs, so the rewrite, whose size does not grow
with the memory, is what is sent. Variables the rewrite adds start with ``__pcm_`` and are dropped from answers
(:func:`strip_hidden`); a query that uses such a name itself is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pcm.errors import QueryError
from pcm.sparql.lexer import tokenize, unescape_local

HIDDEN = "__pcm_"
_CLOSURE = re.compile(r"[*+?]")
_COMMENT = re.compile(r"#[^\r\n]*")


class ScopeError(QueryError):
    """A query that cannot be confined to one memory's graphs."""


@dataclass
class _Tok:
    kind: str
    text: str
    space: str  # what separated it from the token before (whitespace kept, comments turned into a space)

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


def _tokenize(text: str) -> list[_Tok]:
    """The query's tokens (:func:`pcm.sparql.lexer.tokenize`), each with the whitespace before it so the scoped
    text keeps the query's layout (a comment becomes a line break)."""
    tokens: list[_Tok] = []
    end = 0
    for token in tokenize(text):
        if token.kind == "other":
            raise ScopeError(f"cannot read the query near {text[token.start : token.start + 20]!r} to scope it to this memory")
        space = _COMMENT.sub("\n", text[end : token.start])
        tokens.append(_Tok("punct" if token.kind == "dtype" else token.kind, token.text, space))
        end = token.end
    return tokens


class _Unsplittable(Exception):
    """A triples block this scoper does not split (an RDF collection): it is wrapped whole, in one graph."""


class _Cursor:
    """A position in a token list; ``ends_early`` is the error a parser gives when the tokens run out."""

    ends_early = "the query ends too early"

    def __init__(self, tokens: list[_Tok]) -> None:
        self.t = tokens
        self.i = 0

    def peek(self, ahead: int = 0) -> _Tok | None:
        j = self.i + ahead
        return self.t[j] if j < len(self.t) else None

    def peek_text(self) -> str | None:
        """The next token's text; None at the end."""
        tok = self.peek()
        return None if tok is None else tok.text

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise ScopeError(self.ends_early)
        self.i += 1
        return tok


class _Scoper(_Cursor):
    ends_early = "the query ends too early to be scoped to this memory"

    def __init__(self, tokens: list[_Tok], prefix: str, quirks: Quirks) -> None:
        super().__init__(tokens)
        self.prefix = prefix
        self.zero_length = quirks.zero_length_paths
        self.quirks = quirks
        self.graph_vars: list[bool] = []  # for each enclosing GRAPH: whether it names its graph with a variable
        self.out: list[str] = []
        self.prefixes: dict[str, str] = {}
        self.fresh = 0
        self.own_dataset = False

    # -- helpers --------------------------------------------------------------------------------------------

    def emit(self, tok: _Tok) -> None:
        self.out.append(tok.space + tok.text)

    def new_var(self, kind: str) -> str:
        self.fresh += 1
        return f"?{HIDDEN}{kind}{self.fresh}"

    def guard(self, var: str) -> str:
        literal = '"' + self.prefix.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return f" FILTER(STRSTARTS(STR({var}), {literal}))"

    def check_graph(self, tok: _Tok, what: str) -> None:
        """``tok`` (an IRI or a prefixed name) must name a graph of this memory."""
        if tok.kind == "iri":
            iri = tok.text[1:-1]  # escapes left in: a graph IRI written with escapes is refused below
        elif tok.kind == "pname":
            name, _, local = tok.text.partition(":")
            if name not in self.prefixes:
                raise ScopeError(f"{what} {tok.text}: undeclared prefix")
            iri = self.prefixes[name] + unescape_local(local)
        else:
            raise ScopeError(f"{what} needs a graph IRI, found {tok.text!r}")
        if "\\" in iri or not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", iri) or not iri.startswith(self.prefix):
            raise ScopeError(f"{what} <{iri}> is not a graph of this memory: a query reads this memory's graphs only")

    # -- the query ------------------------------------------------------------------------------------------

    def query(self) -> str:
        for tok in self.t:
            if tok.kind == "var" and tok.text[1:].startswith(HIDDEN):
                raise ScopeError(f"variable names starting with {HIDDEN} are reserved ({tok.text})")
            if tok.upper == "SERVICE":
                raise ScopeError("SERVICE is refused: a query reads this memory's graphs only")
        while (nxt := self.peek()) is not None and nxt.upper in ("PREFIX", "BASE"):
            keyword = self.take()
            self.emit(keyword)
            if keyword.upper == "PREFIX":
                name, iri = self.take(), self.take()
                self.prefixes[name.text.rstrip(":")] = iri.text[1:-1]
                self.emit(name)
                self.emit(iri)
            else:
                self.emit(self.take())
        form = self.peek()
        if form is None or form.upper not in ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE"):
            raise ScopeError("not a SPARQL query (SELECT, ASK or CONSTRUCT) that can be scoped to this memory")
        if form.upper == "DESCRIBE":
            raise ScopeError("DESCRIBE is refused on a shared store (the server describes from all its graphs): "
                             "use CONSTRUCT")
        self.emit(self.take())
        if form.upper == "CONSTRUCT":
            self.construct()
        self.head()
        self.modifiers(until_close=False)
        return "".join(self.out)

    def construct(self) -> None:
        """The template is copied as written; the short form ``CONSTRUCT WHERE { T }`` becomes
        ``CONSTRUCT { T } WHERE { scoped T }``."""
        tok = self.peek()
        if tok is not None and tok.text == "{":
            self.verbatim_braces()
            return
        j = self.i
        while j < len(self.t) and self.t[j].text != "{":
            j += 1
        depth, k = 0, j
        while k < len(self.t):
            depth += {"{": 1, "}": -1}.get(self.t[k].text, 0)
            if depth == 0:
                break
            k += 1
        self.out.append(" " + "".join(t.space + t.text for t in self.t[j : k + 1]))

    def head(self) -> None:
        """Projection and dataset clauses up to the WHERE group, which is scoped."""
        while True:
            tok = self.peek()
            if tok is None:
                raise ScopeError("the query has no WHERE group to scope")
            if tok.upper == "FROM":
                self.emit(self.take())
                named = (nxt := self.peek()) is not None and nxt.upper == "NAMED"
                if named:
                    self.emit(self.take())
                graph = self.take()
                self.check_graph(graph, "FROM NAMED" if named else "FROM")
                self.emit(graph)
                self.own_dataset = self.own_dataset or not named  # the default graph is the FROM graphs
                continue
            if tok.text == "{":
                self.where_group()
                return
            self.expression_token()

    def where_group(self) -> None:
        """The WHERE group of a query or subquery. On an engine that hides unprojected variables from a FILTER
        inside OPTIONAL (:class:`Quirks`), a group holding such a FILTER becomes ``{ SELECT * WHERE { ... } }``:
        the same solutions (the query's own projection and modifiers apply to them as before), every variable
        projected inside."""
        wrap = not self.quirks.optional_filter_scope and self.optional_filter_ahead()
        if wrap:
            self.out.append(" { SELECT * WHERE")
        self.group(in_graph=False)
        if wrap:
            self.out.append(" }")

    def optional_filter_ahead(self) -> bool:
        """Whether the group starting at the next token holds an OPTIONAL whose group holds a FILTER."""
        depth, j = 0, self.i
        while j < len(self.t):
            tok = self.t[j]
            depth += {"{": 1, "}": -1}.get(tok.text, 0)
            if depth == 0:
                return False
            if tok.upper == "OPTIONAL" and j + 1 < len(self.t) and self.t[j + 1].text == "{":
                inner, k = 0, j + 1
                while k < len(self.t):
                    inner += {"{": 1, "}": -1}.get(self.t[k].text, 0)
                    if inner == 0:
                        break
                    if self.t[k].upper == "FILTER":
                        return True
                    k += 1
            j += 1
        return False

    def expression_token(self) -> None:
        """Copy one token of an expression or clause; ``EXISTS { ... }`` inside it is a group to scope."""
        tok = self.take()
        self.emit(tok)
        if tok.upper == "EXISTS":
            self.group(in_graph=False)
        elif tok.upper == "VALUES":
            self.values_block()

    def modifiers(self, *, until_close: bool) -> None:
        """Solution modifiers and a trailing VALUES block, to the end (or to the ``}`` closing a subquery)."""
        while self.peek() is not None:
            if until_close and self.peek_text() == "}":
                return
            self.expression_token()
        if until_close:
            raise ScopeError("unbalanced braces in the query")

    def values_block(self) -> None:
        while self.peek_text() not in (None, "{"):
            self.emit(self.take())
        self.verbatim_braces()

    def verbatim_braces(self) -> None:
        depth = 0
        while True:
            tok = self.take()
            self.emit(tok)
            depth += {"{": 1, "}": -1}.get(tok.text, 0)
            if depth == 0:
                return

    def balanced_parens(self, in_graph: bool) -> None:
        depth = 0
        while True:
            tok = self.take()
            self.emit(tok)
            if tok.upper == "EXISTS":
                self.group(in_graph)
                continue
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            if depth == 0:
                return

    # -- group graph patterns -------------------------------------------------------------------------------

    def group(self, in_graph: bool) -> None:
        """A ``{ ... }`` group. ``in_graph``: inside ``GRAPH x``, where patterns read that graph already."""
        self.emit(self.take())  # {
        nxt = self.peek()
        if nxt is not None and nxt.upper == "SELECT":
            while self.peek_text() not in (None, "{"):
                self.expression_token()
            if in_graph:
                self.group(in_graph)
            else:
                self.where_group()
            self.modifiers(until_close=True)
            self.emit(self.take())
            return
        block: list[_Tok] = []
        while True:
            tok = self.peek()
            if tok is None:
                raise ScopeError("unbalanced braces in the query")
            word = tok.upper
            if tok.text == "}":
                self.flush(block, in_graph)
                self.emit(self.take())
                return
            if tok.text == "{":
                self.flush(block, in_graph)
                self.group(in_graph)
            elif word in ("OPTIONAL", "MINUS"):
                self.flush(block, in_graph)
                self.emit(self.take())
                self.group(in_graph)
            elif word == "UNION":
                self.flush(block, in_graph)
                self.emit(self.take())
            elif word == "GRAPH":
                self.flush(block, in_graph)
                self.emit(self.take())
                name = self.take()
                if name.kind != "var":
                    self.check_graph(name, "GRAPH")
                self.emit(name)
                self.graph_vars.append(name.kind == "var")
                self.group(in_graph=True)
                self.graph_vars.pop()
                if name.kind == "var":
                    self.out.append(self.guard(name.text))
            elif word in ("FILTER", "BIND"):
                self.flush(block, in_graph)
                self.emit(self.take())
                self.filter_expression(in_graph)
            elif word == "VALUES":
                self.flush(block, in_graph)
                self.emit(self.take())
                self.values_block()
            else:
                block.append(self.take())

    def filter_expression(self, in_graph: bool) -> None:
        tok = self.peek()
        if tok is None:
            raise ScopeError("the query ends inside a FILTER")
        if tok.text == "(":
            self.balanced_parens(in_graph)
            return
        if tok.upper == "NOT":
            self.emit(self.take())
            tok = self.peek()
        if tok is not None and tok.upper == "EXISTS":
            self.emit(self.take())
            self.group(in_graph)
            return
        self.emit(self.take())  # a function name (a built-in, an IRI or a prefixed name) and its arguments
        self.balanced_parens(in_graph)

    # -- triples on the default graph -----------------------------------------------------------------------

    def flush(self, block: list[_Tok], in_graph: bool) -> None:
        if not block:
            return
        tokens = list(block)
        block.clear()
        if in_graph or self.own_dataset:
            if not self.zero_length and self.graph_vars and self.graph_vars[-1] and any(
                tok.kind == "punct" and tok.text in ("*", "?") for tok in tokens
            ):
                raise ScopeError(
                    "this store's engine drops the zero-length matches of a `*` or `?` path inside GRAPH ?g: write "
                    "the path outside GRAPH (it is still read from this memory's graphs only) or name the graph"
                )
            if not self.quirks.graph_bound_walks and self.graph_vars and self.graph_vars[-1] and _has_walk(tokens, self):
                raise ScopeError(
                    "this store's engine (Virtuoso) walks a `+` path inside GRAPH ?g through every graph of the "
                    "server, other memories' too: write the path outside GRAPH (it is then walked over this "
                    "memory's graphs only) or name the graph"
                )
            for tok in tokens:
                self.emit(tok)
            return
        bnodes: dict[str, str] = {}
        for k, tok in enumerate(tokens):  # a label names one node across the split patterns: a hidden variable
            if tok.kind == "bnode":
                var = bnodes.setdefault(tok.text, self.new_var("b"))
                tokens[k] = _Tok("var", var, tok.space)
        try:
            triples = _Triples(tokens, self).parse()
        except _Unsplittable:
            var = self.new_var("g")
            self.out.append(f" GRAPH {var} {{" + "".join(t.space + t.text for t in tokens) + " }" + self.guard(var))
            return
        if not self.zero_length:
            self.out.append(self.without_zero_length(triples))
            return
        for s, p, o in triples:
            if _is_closure(p):
                self.out.append(self.closure(s, p, o))
            else:
                self.out.append(" " + self.graph_pattern(s, p, o))

    def graph_pattern(self, s: str, p: str, o: str) -> str:
        var = self.new_var("g")
        return f"GRAPH {var} {{ {s} {p} {o} }}" + self.guard(var)

    def closure(self, s: str, p: str, o: str, *, also: str = "") -> str:
        """A triple whose path has ``*``, ``+`` or ``?``. Such a path yields each pair once over the union; per graph
        it would repeat the pair (and a zero-length match) once per graph: DISTINCT over the graphs gives the union's
        answer."""
        ends = [t for t in (s, o) if t[0] in "?$"]
        if not self.quirks.graph_bound_walks:
            body = self.walk_pattern(s, p, o) + also
            if ends:  # the LIMIT makes the engine evaluate the walk on its own, not with the bindings of the join
                return f" {{ SELECT DISTINCT {' '.join(dict.fromkeys(ends))} WHERE {{{body} }} LIMIT {_NO_LIMIT} }}"
            return f" FILTER EXISTS {{{body} }}"
        body = self.graph_pattern(s, p, o) + also
        if ends:
            return f" {{ SELECT DISTINCT {' '.join(dict.fromkeys(ends))} WHERE {{ {body} }} }}"
        return f" FILTER EXISTS {{ {body} }}"

    def walk_pattern(self, s: str, p: str, o: str) -> str:
        """``s p o`` for an engine that walks a ``+`` path through every graph (:class:`Quirks`): each ``+`` step
        becomes Virtuoso's transitive subquery (``OPTION (TRANSITIVE ...)``) over a step relation read from this
        memory's graphs only, so every step of the walk stays in the memory (and steps may come from different
        graphs of it, as over the union); sequences and alternatives holding ``+`` are split around it."""
        if s[0] in "?$" and o[0] in "?$":
            raise ScopeError(
                f"this store's engine (Virtuoso) walks a `+` path only from a fixed end: give an end of {p} a value "
                "(a walk between two variables, or after another step of a sequence, is not answered)"
            )
        return self.emit_path(s, _PathTree(_tokenize(p)).parse(), o)

    def emit_path(self, s: str, node: _PathNode, o: str) -> str:
        if not node.walks:
            return " " + self.graph_pattern(s, node.text, o)
        if node.kind == "alt":
            return " " + " UNION ".join("{" + self.emit_path(s, branch, o) + " }" for branch in node.parts)
        if node.kind == "seq":
            out, current = "", s
            for k, part in enumerate(node.parts):
                target = o if k == len(node.parts) - 1 else self.new_var("p")
                out += self.emit_path(current, part, target)
                current = target
            return out
        if node.inverse:
            s, o = o, s
        assert node.inner is not None
        if node.inner.walks:
            raise ScopeError(
                f"this store's engine (Virtuoso) cannot keep a walk inside this memory's graphs for {node.text}: a "
                "`+` or `*` path repeated inside another; write the inner path apart"
            )
        return self.walk_step(s, node.inner, o)

    def step_pattern(self, a: str, node: _PathNode, b: str) -> str:
        """One step of a walk, ``a node b``, its alternatives as a UNION and an inverse as the triple turned round:
        Virtuoso hangs walking a step written as a path ``(:p|^:p)``."""
        if node.kind == "alt":
            return " UNION ".join("{ " + self.step_pattern(a, part, b) + " }" for part in node.parts)
        if node.kind == "elt" and node.inner is None and node.text.startswith("^"):
            return self.graph_pattern(b, node.text[1:], a)
        return self.graph_pattern(a, node.text, b)

    def walk_step(self, s: str, step: _PathNode, o: str) -> str:
        """``s (step)+ o`` as Virtuoso's transitive subquery over ``step`` read from this memory's graphs. The
        engine walks from a bound end only ("transitive start not given"): a fixed end is given by a FILTER, and
        between two variables every node a step leaves is the start. Its ``t_distinct`` never gives a walk's start
        back, where a path that returns to its start holds the pair (``:c :p :c`` gives ``:c :p+ :c``): the
        second branch finds the starts a step (or a walk and a step) leads back to."""
        s_var, o_var = s[0] in "?$", o[0] in "?$"
        start = s if s_var else self.new_var("w")
        end = o if o_var and o != s else self.new_var("w")

        def walk(a: str, b: str) -> str:
            return (
                f" {{ SELECT {a} {b} WHERE {{ {self.step_pattern(a, step, b)} }} }}"
                f" OPTION (TRANSITIVE, t_in({a}), t_out({b}), t_distinct, t_min(1))"
            )

        def starts() -> str:
            return f" {{ SELECT DISTINCT {start} WHERE {{ {self.step_pattern(start, step, self.new_var('w'))} }} }}"

        main = starts() if s_var and o_var else ""
        main += walk(start, end)
        if not s_var:
            main += _same(start, s)
        if not o_var:
            main += _same(end, o)
        elif o == s:
            main += f" FILTER(sameTerm({end}, {s}))"
        # each part a subquery of its own (the LIMIT keeps the engine from merging them: its compiler fails on
        # the FILTERs that give the starts when they meet in one group)
        main = f" {{ SELECT {start} {end} WHERE {{{main} }} LIMIT {_NO_LIMIT} }}"
        if not s_var and not o_var and not self.same_term(s, o):
            return main  # two different fixed ends: no walk back to the start joins them
        # the starts as a pattern before the walk; a FILTER giving a fixed start after it (the engine hangs or
        # fails to compile otherwise)
        before, after = (starts(), "") if s_var and o_var else ("", _same(start, s if not s_var else o))
        back, via = self.new_var("w"), self.new_var("w")
        returns = (
            f" {{ SELECT DISTINCT {start} WHERE {{"
            f" {{ {{ {self.step_pattern(start, step, back)} }}{after} FILTER(sameTerm({back}, {start})) }} UNION"
            f" {{{before}{walk(start, via)}{after} {{ {self.step_pattern(via, step, back)} }}"
            f" FILTER(sameTerm({back}, {start})) }}"
            f" }} LIMIT {_NO_LIMIT} }}"
        )
        if end == o:
            returns += f" BIND({start} AS {end})"
        return f" {{{main} }} UNION {{{returns} }}"

    def without_zero_length(self, triples: list[tuple[str, str, str]]) -> str:
        """The triples with every ``*`` or ``?`` path written without them (module docstring): a union of the
        block, one branch per way its paths may match, where a zero-length match puts the fixed end in place of the
        variable one throughout the block (and BINDs it when the variable is the query's), and the walks keep to
        the pairs that differ. Virtuoso gets a BIND inside a UNION inside a subquery wrong when it is joined: the
        zero-length part is kept out of subqueries."""
        combos: list[tuple[list[tuple[str, str, str, str]], dict[str, str]]] = [([], {})]
        for s, p, o in triples:
            grown: list[tuple[list[tuple[str, str, str, str]], dict[str, str]]] = []
            for done, bound in combos:
                s2, p2, o2 = (bound.get(t, t) for t in (s, p, o))
                tokens = _tokenize(p2) if not p2.startswith(("?", "$")) else []
                if not any(t.kind == "punct" and t.text in ("*", "?") for t in tokens):
                    grown.append(([*done, (s2, p2, o2, "")], bound))
                    continue
                alternatives = path_alternatives(tokens)
                walks = [steps for steps in alternatives if steps]
                path = "|".join("/".join(steps) for steps in walks)
                ends = [t for t in (s2, o2) if t[0] in "?$"]
                if () in alternatives and not ends and self.same_term(s2, o2):
                    grown.append((done, bound))  # the zero-length match holds: the pattern keeps every solution
                    continue
                if walks:
                    grown.append(([*done, (s2, path, o2, "walk" if () in alternatives else "")], bound))
                if () not in alternatives:
                    continue
                if len(ends) == 2:
                    raise ScopeError(
                        f"this store's engine cannot give the zero-length matches of the path {p} between two variables "
                        f"({s} and {o}): give one end a value, or write the path with + and the equal case apart"
                    )
                if ends:
                    fixed = o2 if s2 == ends[0] else s2
                    grown.append((done, {**bound, ends[0]: fixed}))
            combos = grown
            if len(combos) > MAX_ALTERNATIVES:
                raise ScopeError(
                    f"more than {MAX_ALTERNATIVES} ways for the paths of one group to match: too many to write "
                    "without * and ? for this store's engine; split the group"
                )
        branches = []
        for done, bound in combos:
            parts = []
            for s, p, o, kind in done:
                s, p, o = (bound.get(t, t) for t in (s, p, o))
                if p[0] in "\"'+-0123456789":
                    raise ScopeError(f"a zero-length path would make the literal {p} a predicate: give the path another end")
                if kind == "walk":
                    var = next((t for t in (s, o) if t[0] in "?$"), None)
                    fixed = o if var == s else s
                    # the zero-length pair is the other branch's
                    also = f" FILTER(!sameTerm({var}, {fixed}))" if var is not None else ""
                    parts.append(self.closure(s, p, o, also=also))
                elif _is_closure(p):
                    parts.append(self.closure(s, p, o))
                else:
                    parts.append(" " + self.graph_pattern(s, p, o))
            parts += [f" BIND({fixed} AS {var})" for var, fixed in bound.items() if not var[1:].startswith(HIDDEN)]
            branches.append("".join(parts))
        if len(branches) == 1:
            return branches[0]
        return " " + " UNION ".join("{" + b + " }" for b in branches)

    def same_term(self, a: str, b: str) -> bool:
        """Whether two fixed ends of a path are the same RDF term (prefixed names expanded)."""

        def key(text: str) -> str:
            tokens = _tokenize(text)
            if len(tokens) == 1 and tokens[0].kind == "pname":
                name, _, local = tokens[0].text.partition(":")
                if name in self.prefixes:
                    return "<" + self.prefixes[name] + unescape_local(local) + ">"
            return "".join(t.text for t in tokens)

        return key(a) == key(b)


class _Triples(_Cursor):
    """Turtle-style triples (``;``, ``,``, ``[ ]``, property paths) into single triple patterns."""

    ends_early = "a triple pattern ends too early"

    def __init__(self, tokens: list[_Tok], scoper: _Scoper) -> None:
        super().__init__(tokens)
        self.scoper = scoper
        self.triples: list[tuple[str, str, str]] = []

    def parse(self) -> list[tuple[str, str, str]]:
        while self.peek() is not None:
            if self.peek_text() == ".":
                self.i += 1
                continue
            opened = self.peek_text() == "["
            subject = self.node()
            if opened and self.peek_text() in (None, "."):
                continue
            self.property_list(subject)
        return self.triples

    def node(self) -> str:
        tok = self.take()
        if tok.text == "[":
            var = self.scoper.new_var("b")
            if self.peek_text() == "]":
                self.i += 1
                return var
            self.property_list(var)
            if self.take().text != "]":
                raise ScopeError("unbalanced [ ] in a triple pattern")
            return var
        if tok.text == "(":
            raise _Unsplittable
        if tok.kind == "string":
            text = tok.text
            nxt = self.peek()
            if nxt is not None and nxt.kind == "lang":
                text += self.take().text
            elif nxt is not None and nxt.text == "^^":
                self.i += 1
                text += "^^" + self.take().text
            return text
        if tok.text in ("+", "-") and (nxt := self.peek()) is not None and nxt.kind == "number":
            return tok.text + self.take().text
        if tok.kind in ("var", "iri", "pname", "number") or tok.upper in ("TRUE", "FALSE"):
            return tok.text
        raise ScopeError(f"unexpected {tok.text!r} in a triple pattern")

    def property_list(self, subject: str) -> None:
        while True:
            steps, alternative = self.verb()
            while True:
                obj = self.node()
                self.add(subject, steps, alternative, obj)
                if self.peek_text() == ",":
                    self.i += 1
                    continue
                break
            if self.peek_text() != ";":
                return
            while self.peek_text() == ";":
                self.i += 1
            if self.peek_text() in (None, ".", "]"):
                return

    def add(self, subject: str, steps: list[str], alternative: bool, obj: str) -> None:
        if alternative or len(steps) == 1:
            self.triples.append((subject, " ".join(steps) if not alternative else steps[0], obj))
            return
        current = subject
        for k, step in enumerate(steps):
            target = obj if k == len(steps) - 1 else self.scoper.new_var("p")
            self.triples.append((current, step, target))
            current = target

    def verb(self) -> tuple[list[str], bool]:
        """The predicate: a variable, or a path as its top-level sequence steps (``alternative``: a top-level
        ``|``, so the whole path is one step)."""
        tok = self.peek()
        if tok is not None and tok.kind == "var":
            self.i += 1
            return [tok.text], False
        start = self.i
        steps = [self.path_sequence_step()]
        alternative = False
        while self.peek_text() in ("/", "|"):
            alternative = alternative or self.peek_text() == "|"
            self.i += 1
            steps.append(self.path_sequence_step())
        if alternative:
            return ["".join(t.space + t.text for t in self.t[start : self.i]).strip()], True
        return steps, False

    def path_sequence_step(self) -> str:
        start = self.i
        if self.peek_text() == "^":
            self.i += 1
        self.path_primary()
        nxt = self.peek()
        if nxt is not None and nxt.text in ("*", "+", "?"):
            self.i += 1
        return "".join(t.space + t.text for t in self.t[start : self.i]).strip()

    def path_primary(self) -> None:
        tok = self.take()
        if tok.kind in ("iri", "pname") or tok.text == "a":
            return
        if tok.text == "!":
            if self.peek_text() == "(":
                self.skip_parens()
            else:
                if self.peek_text() == "^":
                    self.i += 1
                self.take()
            return
        if tok.text == "(":
            self.i -= 1
            self.skip_parens()
            return
        raise ScopeError(f"unexpected {tok.text!r} where a predicate was expected")

    def skip_parens(self) -> None:
        depth = 0
        while True:
            tok = self.take()
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            if depth == 0:
                return


def _past_negated_set(tokens: list[_Tok], i: int) -> int:
    """Where a negated property set ends, given the index just after its ``!``: past the bracket that closes
    ``!(a|^b)``, or past the one IRI of ``!a`` and ``!^a``."""
    if i < len(tokens) and tokens[i].text == "(":
        depth = 0
        while i < len(tokens):
            depth += {"(": 1, ")": -1}.get(tokens[i].text, 0)
            i += 1
            if depth == 0:
                break
        return i
    if i < len(tokens) and tokens[i].text == "^":
        i += 1
    return i + 1


@dataclass
class _PathNode:
    """A property path as a tree: ``alt`` (``|``) and ``seq`` (``/``) hold ``parts``; ``elt`` is a primary
    (``inner``, None for an IRI, ``a`` or a negated set) with its ``^`` and a ``+``. ``walks``: a ``+`` inside."""

    kind: str
    text: str
    parts: list[_PathNode]
    inner: _PathNode | None = None
    inverse: bool = False
    walks: bool = False


class _PathTree:
    """The SPARQL 1.1 path grammar (Path, PathSequence, PathEltOrInverse, PathPrimary) over tokens, into
    :class:`_PathNode` (``*`` and ``?`` are refused: the zero-length rewrite has taken them out before)."""

    def __init__(self, tokens: list[_Tok]) -> None:
        self.t = tokens
        self.i = 0

    def parse(self) -> _PathNode:
        node = self.path()
        if self.i != len(self.t):
            raise ScopeError(f"cannot read the path {self.text(0, len(self.t))!r}")
        return node

    def text(self, start: int, end: int) -> str:
        return "".join(t.space + t.text for t in self.t[start:end]).strip()

    def peek(self) -> str | None:
        return self.t[self.i].text if self.i < len(self.t) else None

    def path(self) -> _PathNode:
        return self._joined("alt", "|", self.sequence)

    def sequence(self) -> _PathNode:
        return self._joined("seq", "/", self.element)

    def _joined(self, kind: str, operator: str, part: Callable[[], _PathNode]) -> _PathNode:
        """One ``part``, or several joined by ``operator`` (``|`` alternatives, ``/`` a sequence) as one ``kind``."""
        start = self.i
        parts = [part()]
        while self.peek() == operator:
            self.i += 1
            parts.append(part())
        if len(parts) == 1:
            return parts[0]
        return _PathNode(kind, self.text(start, self.i), parts, walks=any(p.walks for p in parts))

    def element(self) -> _PathNode:
        start = self.i
        inverse = self.peek() == "^"
        if inverse:
            self.i += 1
        inner = self.primary()
        modifier = self.peek() if self.peek() in ("*", "+", "?") else None
        if modifier in ("*", "?"):
            raise ScopeError(f"a `{modifier}` path is left after the zero-length rewrite: {self.text(start, self.i + 1)}")
        if modifier is None:
            return _inverted(inner) if inverse else inner
        self.i += 1
        return _PathNode("elt", self.text(start, self.i), [], inner=inner, inverse=inverse, walks=True)

    def primary(self) -> _PathNode:
        if self.i >= len(self.t):
            raise ScopeError("a property path ends too early")
        start = self.i
        tok = self.t[self.i]
        self.i += 1
        if tok.text == "(":
            inner = self.path()
            if self.peek() != ")":
                raise ScopeError("unbalanced ( ) in a property path")
            self.i += 1
            return _PathNode(inner.kind, self.text(start, self.i), inner.parts, inner.inner, inner.inverse, inner.walks)
        if tok.text == "!":
            self.i = _past_negated_set(self.t, self.i)
        return _PathNode("elt", self.text(start, self.i), [])


def _same(var: str, term: str) -> str:
    """A FILTER binding ``var`` to a fixed term, as Virtuoso takes a walk's start from it (``=``; a literal's term
    is checked as well, ``=`` comparing its value)."""
    out = f" FILTER({var} = {term})"
    if term[0] in "\"'+-0123456789":
        out += f" FILTER(sameTerm({var}, {term}))"
    return out


def _inverted(node: _PathNode) -> _PathNode:
    """``^node``: a sequence reversed with each part inverted, each branch of an alternative inverted."""
    if not node.walks:
        text = node.text[1:] if node.kind == "elt" and node.text.startswith("^") else f"^({node.text})"
        return _PathNode("elt", text, [])
    parts = [_inverted(part) for part in node.parts]
    text = f"^({node.text})"
    if node.kind == "seq":
        return _PathNode("seq", text, parts[::-1], walks=True)
    if node.kind == "alt":
        return _PathNode("alt", text, parts, walks=True)
    return _PathNode("elt", text, [], inner=node.inner, inverse=not node.inverse, walks=True)


def _has_walk(tokens: list[_Tok], scoper: _Scoper) -> bool:
    """Whether a triples block written as it is (inside GRAPH) holds a ``+`` path."""
    try:
        copied = [_Tok("var" if t.kind == "bnode" else t.kind, t.text, t.space) for t in tokens]
        triples = _Triples(copied, scoper).parse()
    except _Unsplittable:
        return any(t.kind == "punct" and t.text == "+" for t in tokens)
    return any(_is_closure(p) for _s, p, _o in triples)


#: Most alternatives one path is written as without ``*`` and ``?`` (each ``*`` or ``?`` in a sequence doubles them).
MAX_ALTERNATIVES = 16


def _is_closure(p: str) -> bool:
    """Whether a predicate (a variable or a path's text) has ``*``, ``+`` or ``?`` outside IRIs."""
    return p[0] not in "?$" and bool(_CLOSURE.search(re.sub(r"<[^>]*>", "", p)))


def path_alternatives(tokens: list[_Tok]) -> list[tuple[str, ...]]:
    """A property path (its tokens) as alternatives, each a sequence of steps without ``*`` or ``?``; the empty
    sequence is the zero-length path. ``p*`` is ``()`` or ``(p)+``; ``p?`` is ``()`` or ``p``; ``^`` reverses a
    sequence and inverts its steps. :class:`ScopeError` for ``+`` or ``*`` over a group holding ``*`` or ``?``."""
    parser = _PathParser(tokens)
    alternatives = parser.path()
    if parser.i != len(tokens):
        raise ScopeError(f"cannot read the path {''.join(t.space + t.text for t in tokens).strip()!r}")
    return alternatives


class _PathParser:
    """The SPARQL 1.1 path grammar (Path, PathSequence, PathEltOrInverse, PathPrimary) over tokens."""

    def __init__(self, tokens: list[_Tok]) -> None:
        self.t = tokens
        self.i = 0

    def peek(self) -> str | None:
        return self.t[self.i].text if self.i < len(self.t) else None

    def path(self) -> list[tuple[str, ...]]:
        alternatives = self.sequence()
        while self.peek() == "|":
            self.i += 1
            alternatives = _dedup(alternatives + self.sequence())
        return alternatives

    def sequence(self) -> list[tuple[str, ...]]:
        alternatives = self.element()
        while self.peek() == "/":
            self.i += 1
            after = self.element()
            alternatives = _dedup([a + b for a in alternatives for b in after])
        return alternatives

    def element(self) -> list[tuple[str, ...]]:
        inverse = self.peek() == "^"
        if inverse:
            self.i += 1
        start = self.i
        inner = self.primary()
        text = "".join(t.space + t.text for t in self.t[start : self.i]).strip()
        nested = any(t.kind == "punct" and t.text in ("*", "?") for t in self.t[start : self.i])
        if inverse:
            inner = [tuple(_invert(step) for step in reversed(steps)) for steps in inner]
        modifier = self.peek() if self.peek() in ("*", "+", "?") else None
        if modifier is None:
            return inner
        self.i += 1
        if modifier == "?":
            return _dedup([(), *inner])
        if nested:
            raise ScopeError(
                f"this store's engine drops zero-length matches inside a path: {text}{modifier} repeats a path that "
                "holds * or ?, which cannot be written without them"
            )
        repeated = ("^" if inverse else "") + text + "+"
        return [(), (repeated,)] if modifier == "*" else [(repeated,)]

    def primary(self) -> list[tuple[str, ...]]:
        if self.i >= len(self.t):
            raise ScopeError("a property path ends too early")
        tok = self.t[self.i]
        self.i += 1
        if tok.text == "(":
            inner = self.path()
            if self.peek() != ")":
                raise ScopeError("unbalanced ( ) in a property path")
            self.i += 1
            return inner
        if tok.text == "!":
            start = self.i - 1
            self.i = _past_negated_set(self.t, self.i)
            return [("".join(t.space + t.text for t in self.t[start : self.i]).strip(),)]
        return [(tok.text,)]


def _invert(step: str) -> str:
    return step[1:] if step.startswith("^") else "^" + step


def _dedup(alternatives: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    unique = list(dict.fromkeys(alternatives))
    if len(unique) > MAX_ALTERNATIVES:
        raise ScopeError(
            f"a property path with more than {MAX_ALTERNATIVES} ways to match is too long to write without * and ? "
            "for this store's engine: split it"
        )
    return unique


@dataclass(frozen=True)
class Quirks:
    """What a store's engine answers otherwise than the standard under this rewrite, which the rewrite writes
    around (each ``False`` is a deviation; :data:`STANDARD` has none). The engine profiles hold them
    (:mod:`pcm.backend_remote`); docs/engines.md lists what each costs."""

    #: ``*`` and ``?`` paths inside ``GRAPH ?g`` give their zero-length matches (Virtuoso 7.2 drops them: such paths
    #: are written without ``*`` and ``?``).
    zero_length_paths: bool = True
    #: A ``+`` path inside ``GRAPH ?g`` keeps to that graph, and its answer does not depend on the patterns joined
    #: with it. Virtuoso 7.2 walks it through every graph of the server (``:a :p+ ?z`` reaches nodes only another
    #: memory's graph leads to) and, joined with patterns that bind an end, drops some pairs: each ``+`` step is
    #: written as its transitive subquery over the memory's graphs, evaluated on its own (:meth:`_Scoper.walk_pattern`).
    graph_bound_walks: bool = True
    #: A FILTER inside OPTIONAL sees the variables of the group around it. Virtuoso 7.2 hides from it those the
    #: query does not project (the filter then fails): the group is wrapped in ``SELECT *``.
    optional_filter_scope: bool = True


STANDARD = Quirks()
#: Virtuoso 7.2 (Debian's virtuoso-opensource), as tests/test_engines_differential.py finds it.
VIRTUOSO = Quirks(zero_length_paths=False, graph_bound_walks=False, optional_filter_scope=False)
#: A LIMIT no answer reaches, which keeps an engine from evaluating a subquery with the bindings around it.
_NO_LIMIT = 2_147_483_647


def scope_query(text: str, prefix: str, *, zero_length: bool = True, quirks: Quirks | None = None) -> str:
    """``text`` rewritten to read only graphs whose names start with ``prefix`` (see the module docstring);
    :class:`ScopeError` for a query that cannot be confined. ``quirks``: what the engine gets wrong, written around
    (:class:`Quirks`); ``zero_length=False`` alone is ``Quirks(zero_length_paths=False)``."""
    if quirks is None:
        quirks = Quirks(zero_length_paths=zero_length)
    return _Scoper(_tokenize(text), prefix, quirks).query()


def strip_hidden(variables: tuple[str, ...]) -> list[int] | None:
    """Positions of the variables to keep when the rewrite's own variables came back (``SELECT *``); None when
    there are none."""
    if not any(v.startswith(HIDDEN) for v in variables):
        return None
    return [k for k, v in enumerate(variables) if not v.startswith(HIDDEN)]
