// pcm explorer: a small single-page app over pcm serve's JSON API and SPARQL endpoint.
// No framework, no build step, nothing fetched from elsewhere. Memory text is only ever set with textContent.
// The SPARQL editor is YASQE, vendored under /static/vendor/yasqe/ by scripts/vendor_yasqe.sh.
"use strict";

const view = document.getElementById("view");
let info = null;

const RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
const DEFAULT_QUERY = `PREFIX sioc: <http://rdfs.org/sioc/ns#>
PREFIX dcterms: <http://purl.org/dc/terms/>
SELECT ?post ?time ?text WHERE {
  ?post a sioc:Post ; sioc:content ?text .
  OPTIONAL { ?post dcterms:created ?time }
}
ORDER BY ?time
LIMIT 50`;

// ---------------------------------------------------------------------------------------------- DOM helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function show(...nodes) {
  view.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
}

function errorBox(message) {
  return el("div", { class: "error", role: "alert" }, message);
}

function route(path, params) {
  const query = new URLSearchParams(params || {}).toString();
  return "#" + path + (query ? "?" + query : "");
}

function entityHref(iri) {
  return route("/entity", { iri });
}

function conversationHref(thread, post) {
  return route("/conversation", post ? { iri: thread, post } : { iri: thread });
}

// Times as they were written (the speaker's local time), not converted to the browser's zone.
function when(text) {
  if (!text) return "";
  const match = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}:\d{2}))?/.exec(text);
  return match ? match[1] + (match[2] ? " " + match[2] : "") : text;
}

function isMemoryIri(iri) {
  return info && iri.startsWith(info.namespace);
}

// ---------------------------------------------------------------------------------------------- data access

async function api(path, params) {
  const query = new URLSearchParams(params || {}).toString();
  const response = await fetch("/api/" + path + (query ? "?" + query : ""), { headers: { Accept: "application/json" } });
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

async function sparql(text) {
  const response = await fetch("/query", {
    method: "POST",
    headers: { "Content-Type": "application/sparql-query", Accept: "application/sparql-results+json, text/turtle;q=0.9" },
    body: text,
  });
  const body = await response.text();
  if (!response.ok) throw new Error(body.trim() || response.statusText);
  const type = (response.headers.get("Content-Type") || "").split(";")[0];
  return type === "application/sparql-results+json" ? { json: JSON.parse(body) } : { text: body, type };
}

// ---------------------------------------------------------------------------------------------- terms

function termNode(term) {
  if (!term) return el("span", { class: "muted" }, "—");
  if (term.type === "uri") {
    const label = term.label || term.curie || term.value;
    const link = el("a", { href: entityHref(term.value), title: term.value, class: "term-link" }, label);
    return term.label && term.curie ? el("span", {}, link, " ", el("span", { class: "muted iri" }, term.curie)) : link;
  }
  if (term.type === "literal") {
    const extra = term.lang ? "@" + term.lang : term.datatype ? " (" + term.datatype + ")" : "";
    return el("span", { class: "literal" }, term.value, extra ? el("span", { class: "muted" }, extra) : null);
  }
  return el("span", { class: "iri muted" }, term.type === "bnode" ? "_:" + term.value : term.value);
}

// Terms as the SPARQL JSON results format writes them.
function resultTermNode(term) {
  if (!term) return "";
  if (term.type === "uri") {
    return el("a", { href: entityHref(term.value), class: "iri", title: term.value }, shortIri(term.value));
  }
  if (term.type === "bnode") return el("span", { class: "iri muted" }, "_:" + term.value);
  if (term.type === "triple") return el("span", { class: "iri" }, JSON.stringify(term.value));
  return term.value;
}

function shortIri(iri) {
  if (isMemoryIri(iri)) return "m:" + iri.slice(info.namespace.length);
  return iri;
}

// ---------------------------------------------------------------------------------------------- pages

async function homePage() {
  const list = await api("conversations");
  const rows = list.map((c) =>
    el("tr", {},
      el("td", {}, el("a", { href: conversationHref(c.iri), class: "conversation-link" }, c.title || c.id || c.iri)),
      el("td", { class: "muted" }, c.id || ""),
      el("td", {}, String(c.posts)),
      el("td", { class: "muted" }, when(c.first))));
  show(
    el("h1", {}, info ? `${info.owner}'s memory` : "Memory"),
    el("p", { class: "muted" }, `${list.length} conversation(s). Open one to see what each turn produced, or search above.`),
    list.length
      ? el("table", { id: "conversations" }, el("thead", {}, el("tr", {}, el("th", {}, "Conversation"), el("th", {}, "Session"), el("th", {}, "Turns"), el("th", {}, "Started"))), el("tbody", {}, rows))
      : el("p", {}, "Nothing stored yet: ingest conversations with `pcm ingest` or POST /api/ingest."));
}

function sparqlPage(params) {
  const holder = el("div", { id: "sparql-query" });
  const results = el("div", { id: "results" });
  const status = el("span", { class: "muted", id: "query-status" });
  let editor = null;
  const run = async () => {
    const text = editor.getValue();
    sessionStorage.setItem("pcm.query", text);
    status.textContent = "running…";
    results.replaceChildren();
    const started = performance.now();
    try {
      const answer = await sparql(text);
      const ms = Math.round(performance.now() - started);
      results.replaceChildren(renderResults(answer));
      status.textContent = `${countOf(answer)} in ${ms} ms`;
    } catch (err) {
      status.textContent = "";
      results.replaceChildren(errorBox(err.message));
    }
  };
  show(
    el("h1", {}, "SPARQL"),
    el("p", { class: "muted" }, "Read-only queries over the whole memory (the default graph is the union of all graphs). " +
      "Ctrl+Enter runs; Ctrl+Space completes. Prefixes, classes and properties are offered from the memory's own vocabulary."),
    holder,
    el("div", { class: "toolbar" }, el("button", { id: "run-query", type: "button", onclick: run }, "Run"), status),
    results);
  // YASQE draws into the page, so the editor is made once its holder is attached.
  editor = queryEditor(holder, params.get("q") || sessionStorage.getItem("pcm.query") || DEFAULT_QUERY, run);
  if (params.get("run")) run();
}

// The memory's prefixes as YASQE's prefix completer lists them ("pcm: <IRI>"):
// the vocabularies pcm knows (from /api/info) and m: for this memory's own individuals.
function prefixDeclarations() {
  const known = Object.assign({}, info ? info.prefixes : {}, info ? { m: info.namespace } : {});
  return Object.entries(known).map(([prefix, iri]) => `${prefix}: <${iri}>`).sort();
}

const CLASS_KINDS = "owl:Class rdfs:Class";
const PROPERTY_KINDS = "owl:ObjectProperty owl:DatatypeProperty owl:AnnotationProperty rdf:Property";

// The IRIs the memory declares as one of `kinds` (its ontology and the vocabularies loaded with it), for completion.
async function ontologyTerms(kinds) {
  const answer = await sparql(`PREFIX owl: <http://www.w3.org/2002/07/owl#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT DISTINCT ?term WHERE { VALUES ?kind { ${kinds} } ?term a ?kind FILTER isIRI(?term) } ORDER BY ?term`);
  return answer.json.results.bindings.map((b) => b.term.value);
}

// A SPARQL editor in `holder`: YASQE with highlighting, syntax checking and completion of the memory's prefixes,
// classes and properties and the query's variables; nothing it offers is fetched from elsewhere. A plain textarea
// if YASQE did not load.
function queryEditor(holder, text, run) {
  if (!window.Yasqe) {
    const area = el("textarea", { class: "plain-editor", spellcheck: "false", "aria-label": "SPARQL query" });
    area.value = text;
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) run();
    });
    holder.append(area);
    return { getValue: () => area.value };
  }
  const Yasqe = window.Yasqe;
  // Fresh lists each time the page opens, stored nowhere (YASQE would otherwise keep them in localStorage for 30 days).
  // The stock class and property completers ask lov.linkeddata.es; these ask the memory's own ontology instead.
  const own = { persistenceId: null, bulk: true, autoShow: true };
  Yasqe.forkAutocompleter("prefixes", { ...own, name: "pcm-prefixes", get: prefixDeclarations() }, false);
  for (const [stock, name, kinds] of [["class", "pcm-classes", CLASS_KINDS], ["property", "pcm-properties", PROPERTY_KINDS]]) {
    const valid = Yasqe.Autocompleters[stock].isValidCompletionPosition;
    Yasqe.forkAutocompleter(stock, {
      ...own,
      name,
      get: () => ontologyTerms(kinds),
      // Offered once a term is begun (as the stock ones do), not on every space after "a" or a subject.
      isValidCompletionPosition: (yasqe) => yasqe.getCompleteToken().string.trim() !== "" && valid(yasqe),
    }, false);
  }
  Yasqe.defaults.autocompleters = ["variables", "pcm-prefixes", "pcm-classes", "pcm-properties"];
  return new Yasqe(holder, {
    value: text,
    persistenceId: null, // the page keeps the last query in sessionStorage itself
    consumeShareLink: null, // the page's own #/sparql?q=... carries a query
    createShareableLink: null,
    showQueryButton: false, // the Run button below runs it through /query
    resizeable: true,
    editorHeight: "16rem",
    extraKeys: { "Ctrl-Enter": () => run(), "Cmd-Enter": () => run() },
  });
}

function countOf(answer) {
  if (answer.json && answer.json.results) return `${answer.json.results.bindings.length} row(s)`;
  if (answer.json && "boolean" in answer.json) return "answer";
  return "graph";
}

function renderResults(answer) {
  if (answer.text !== undefined) return el("pre", { class: "graph-result" }, answer.text);
  const json = answer.json;
  if ("boolean" in json) return el("p", { class: "boolean-result" }, json.boolean ? "yes (true)" : "no (false)");
  const vars = json.head.vars;
  const rows = json.results.bindings.map((b) => el("tr", {}, vars.map((v) => el("td", {}, resultTermNode(b[v])))));
  return el("table", { class: "results" }, el("thead", {}, el("tr", {}, vars.map((v) => el("th", {}, "?" + v)))), el("tbody", {}, rows));
}

async function entityPage(params) {
  const iri = params.get("iri");
  if (!iri) return show(errorBox("no entity given"));
  const entity = await api("entity", { iri });
  const facts = entity.facts.map((fact) =>
    el("tr", { class: "fact" },
      el("td", {}, fact.direction === "in" ? el("span", { class: "muted" }, "is ") : null, termNode(fact.predicate),
        fact.direction === "in" ? el("span", { class: "muted" }, " of") : null),
      el("td", {}, termNode(fact.value)),
      el("td", {}, sourcesList(fact.sources))));
  show(
    el("h1", { id: "entity-title" }, entity.label),
    el("p", { class: "muted iri" }, entity.iri),
    el("div", {}, entity.types.map((t) => el("a", { class: "chip", href: entityHref(t.value), title: t.value }, t.curie || t.value))),
    el("h2", {}, "Facts"),
    facts.length
      ? el("table", { id: "facts" }, el("thead", {}, el("tr", {}, el("th", {}, "Property"), el("th", {}, "Value"), el("th", {}, "Said in"))), el("tbody", {}, facts))
      : el("p", { class: "muted" }, "No extracted facts mention this entity."),
    entity.truncated ? el("p", { class: "muted" }, "Only the first facts are shown.") : null,
    el("h2", {}, "Neighbourhood"),
    graphView(entity),
    entity.related.length ? el("h2", {}, "Related entities") : null,
    el("div", {}, entity.related.map((r) => el("a", { class: "chip", href: entityHref(r.value) }, r.label || r.curie))));
}

function sourcesList(sources) {
  return el("ul", { class: "fact-sources" }, sources.map((s) => {
    if (!s.post) return el("li", { class: "muted" }, s.file ? `imported from ${s.file}` : s.graph);
    const who = s.speaker || s.role || "";
    return el("li", {},
      el("span", { class: "source-text" }, "“" + (s.text || "") + "”"), " ",
      el("span", { class: "muted" }, `${who}${who ? ", " : ""}${when(s.time)} `),
      s.thread ? el("a", { href: conversationHref(s.thread, s.post), class: "in-conversation" }, "in conversation") : null);
  }));
}

// A radial layout: the entity in the middle, each neighbour on a circle, edges labelled with the property.
function graphView(entity) {
  const width = 900, height = 440, cx = width / 2, cy = height / 2;
  const neighbours = new Map();
  for (const fact of entity.facts) {
    if (fact.value.type !== "uri" && fact.value.type !== "bnode") continue;
    if (fact.predicate.value === RDF_TYPE) continue; // types are shown as chips, not as neighbours
    const key = fact.value.value;
    if (!neighbours.has(key)) neighbours.set(key, { term: fact.value, edges: [] });
    neighbours.get(key).edges.push((fact.direction === "in" ? "← " : "") + (fact.predicate.curie || fact.predicate.value));
  }
  const items = [...neighbours.values()].slice(0, 40);
  const radius = Math.min(cx, cy) - 50;
  const graph = svg("svg", { class: "graph", id: "graph-view", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "neighbourhood graph" });
  items.forEach((item, i) => {
    const angle = (2 * Math.PI * i) / Math.max(items.length, 1) - Math.PI / 2;
    item.x = cx + radius * Math.cos(angle);
    item.y = cy + radius * Math.sin(angle);
    graph.append(svg("line", { x1: cx, y1: cy, x2: item.x, y2: item.y }));
    graph.append(svg("text", { class: "edge", x: (cx + item.x) / 2, y: (cy + item.y) / 2 - 3, "text-anchor": "middle" }, item.edges.join(", ")));
  });
  for (const item of items) {
    const go = () => { if (item.term.type === "uri") location.hash = entityHref(item.term.value); };
    graph.append(svg("circle", { cx: item.x, cy: item.y, r: 9, onclick: go }, svg("title", {}, item.term.value)));
    graph.append(svg("text", { x: item.x, y: item.y + 22, "text-anchor": "middle" }, item.term.label || item.term.curie || item.term.value));
  }
  graph.append(svg("circle", { class: "center", cx, cy, r: 13 }));
  graph.append(svg("text", { x: cx, y: cy + 28, "text-anchor": "middle", "font-weight": "bold" }, entity.label));
  if (!items.length) graph.append(svg("text", { x: cx, y: cy - 30, "text-anchor": "middle", class: "edge" }, "no linked entities"));
  return graph;
}

async function conversationPage(params) {
  const thread = params.get("iri") || params.get("id");
  if (!thread) return show(errorBox("no conversation given"));
  const conversation = await api("conversation", params.get("iri") ? { iri: thread } : { id: thread });
  const highlighted = params.get("post");
  const posts = conversation.posts.map((p) => {
    const node = el("div", { class: `post role-${p.role}${p.post === highlighted ? " highlight" : ""}`, id: "post-" + p.position, "data-post": p.post },
      el("div", { class: "meta" }, `${p.speaker || p.role} · ${when(p.time)}${p.source_id ? " · " + p.source_id : ""}${p.status ? " · extraction " + p.status : ""}`),
      el("div", { class: "text" }, p.text),
      p.facts.length
        ? el("ul", { class: "facts" }, p.facts.map((f) => el("li", { class: "produced-fact" }, termNode(f.s), " ", termNode(f.p), " ", termNode(f.o))))
        : null);
    return node;
  });
  show(
    el("h1", {}, conversation.title || conversation.id || "Conversation"),
    el("p", { class: "muted" }, `session ${conversation.id || ""} · ${conversation.posts.length} turn(s) · started ${when(conversation.created || (conversation.posts[0] || {}).time) || "?"}`),
    el("div", { id: "posts" }, posts));
  const target = view.querySelector(".post.highlight");
  if (target) target.scrollIntoView({ block: "center" });
}

async function searchPage(params) {
  const text = params.get("q") || "";
  document.getElementById("search-box").value = text;
  if (!text) return show(el("p", { class: "muted" }, "Type something to search for."));
  const result = await api("search", { q: text });
  const entities = result.entities.map((e) =>
    el("li", {}, el("a", { href: entityHref(e.iri), class: "entity-hit" }, e.label || e.iri),
      e.score !== null && e.score !== undefined ? el("span", { class: "score" }, e.how + " " + Number(e.score).toFixed(3)) : null));
  const hits = result.hits.map((h) =>
    el("div", { class: "hit card" },
      el("div", { class: "meta muted" }, `${h.speaker || h.role} · ${when(h.time)} · session ${h.session}`,
        h.score !== null && h.score !== undefined ? el("span", { class: "score" }, "score " + Number(h.score).toFixed(3)) : null),
      el("div", {}, h.text), " ",
      el("a", { href: route("/conversation", { id: h.session, post: h.post }), class: "in-conversation" }, "in conversation")));
  show(
    el("h1", {}, `Search: ${text}`),
    el("p", { class: "muted" }, result.mode === "hybrid" ? "Hybrid recall (meaning and words) over the side index." : "Text search (the side index is off)."),
    el("h2", {}, "Entities"),
    entities.length ? el("ul", { id: "entity-hits" }, entities) : el("p", { class: "muted" }, "No entity matches."),
    el("h2", {}, "Utterances"),
    hits.length ? el("div", { id: "utterance-hits" }, hits) : el("p", { class: "muted" }, "No utterance matches."));
}

// ---------------------------------------------------------------------------------------------- routing

const pages = { "/": homePage, "/sparql": sparqlPage, "/entity": entityPage, "/conversation": conversationPage, "/search": searchPage };

async function render() {
  const hash = location.hash.slice(1) || "/";
  const [path, query] = hash.split("?");
  const page = pages[path] || homePage;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.getAttribute("href") === "#" + path);
  try {
    await page(new URLSearchParams(query || ""));
  } catch (err) {
    show(errorBox(err.message));
  }
}

document.getElementById("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = document.getElementById("search-box").value.trim();
  if (text) location.hash = route("/search", { q: text });
});

window.addEventListener("hashchange", render);

(async () => {
  try {
    info = await api("info");
    document.getElementById("owner").textContent = `${info.owner} · ${info.writable ? "writable with token" : "read-only"}`;
  } catch (err) {
    info = null;
  }
  render();
})();
