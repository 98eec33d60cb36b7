"""The ontology authoring workflow behind ``pcm ontology …`` (issue 8).

``check`` (parse, OWL 2 consistency with HermiT, lint, term usage in shapes, queries and prompts), ``catalog``
(the prompt catalogue and its staleness), ``docs`` (HTML and Markdown reference), ``competency`` (``pcm ontology
test``), ``diff`` (terms, axioms, breaking changes), ``migrate`` (re-validation, backup, atomic SPARQL Update
migrations, version bump) and ``propose`` (terms extraction wanted but the ontology lacks). Each module is usable
without the CLI; :mod:`pcm.cli_ontology` is a thin shell over them.
"""
