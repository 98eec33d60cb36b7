#!/usr/bin/env bash
# Vendors YASQE (the SPARQL editor the explorer uses) into src/pcm/endpoint/static/vendor/yasqe/ so that pcm serve
# needs neither npm nor a CDN at run time. Run it again with another version to upgrade, then commit the result:
#
#   scripts/vendor_yasqe.sh            # the pinned version below
#   scripts/vendor_yasqe.sh 4.6.3      # another one
#
# The package's built files are copied as npm ships them (yasqe.min.js is one self-contained UMD bundle with
# CodeMirror 5 inside; yasqe.min.css carries CodeMirror's styles too). Source maps are left out (1.7 MB each).
# VERSION records the package, its tarball integrity and the files' SHA-256; LICENSE holds YASQE's MIT licence
# and THIRD-PARTY-LICENSES the licences of the packages the bundle was built from.
set -euo pipefail

version="${1:-4.6.2}"
package="@zazuko/yasqe"            # the maintained fork of @triply/yasqe (MIT)
root="$(cd "$(dirname "$0")/.." && pwd)"
target="$root/src/pcm/endpoint/static/vendor/yasqe"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
npm init -y >/dev/null
# --ignore-scripts: nothing from the registry runs here; the dependencies are installed only to read their licences.
npm install --silent --no-audit --no-fund --ignore-scripts "$package@$version" >/dev/null
built="node_modules/$package/build"
integrity="$(npm view "$package@$version" dist.integrity)"
licence="$(node -p "require('./node_modules/$package/package.json').license")"
if [ "$licence" != "MIT" ]; then
  echo "vendor_yasqe: $package@$version declares licence '$licence', not MIT: not vendored" >&2
  exit 1
fi

# The fork ships no licence file; its upstream package carries the MIT text both are published under.
npm pack --silent "@triply/yasqe" >/dev/null
mkdir upstream && tar xzf triply-yasqe-*.tgz -C upstream

rm -rf "$target"
mkdir -p "$target"
cp "$built/yasqe.min.js" "$built/yasqe.min.css" "$target/"
cp upstream/package/LICENSE.txt "$target/LICENSE"

# Licences of the runtime dependencies the bundle was built from (names and licence texts as installed).
node - "$package" >"$target/THIRD-PARTY-LICENSES" <<'JS'
const fs = require("fs"), path = require("path");
const seen = new Set(), out = [];
function visit(name, from) {
  let dir = from;
  for (;;) {
    const candidate = path.join(dir, "node_modules", name);
    if (fs.existsSync(path.join(candidate, "package.json"))) { dir = candidate; break; }
    const up = path.dirname(dir);
    if (up === dir) return;
    dir = up;
  }
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const key = meta.name + "@" + meta.version;
  if (seen.has(key)) return;
  seen.add(key);
  if (meta.name !== process.argv[2]) {
    const file = fs.readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const text = file ? fs.readFileSync(path.join(dir, file), "utf8").trim() : "(no licence file in the package)";
    out.push(`${key} (${meta.license || "unknown"})\n\n${text}\n`);
  }
  for (const dep of Object.keys(meta.dependencies || {})) visit(dep, dir);
}
visit(process.argv[2], process.cwd());
process.stdout.write(out.sort().join("\n" + "-".repeat(78) + "\n\n"));
JS

{
  echo "package: $package"
  echo "version: $version"
  echo "licence: $licence"
  echo "integrity: $integrity"
  echo "files (sha256):"
  (cd "$target" && sha256sum yasqe.min.js yasqe.min.css | sed 's/^/  /')
} >"$target/VERSION"

du -ch "$target"/* | tail -n 1 | sed "s|total|vendored in $target|"
