#!/usr/bin/env bash
# `make docs`: the library's documentation as DocC, one static site in .build/docs (serve that directory: its root
# leads to /documentation/, the list of products). Every library product's module has a catalog,
# Sources/<Module>/<Module>.docc, holding its landing page; the articles are not written there but made at build time
# from sections of docs/*.md (ARTICLES below), in copies of the catalogs under .build/docs-work, with only what DocC
# needs changed: the title line, heading levels, and relative links to other pages turned into their paths as code.
# Symbol graphs come from the modules `swift build` leaves (swift-symbolgraph-extract, a second or two; after
# `swift build --build-tests` nothing is rebuilt), so no package plugin and no second build. Each module is converted
# with `docc convert --warnings-as-errors` (an unresolved symbol or article link fails; the completeness of parameter
# documentation is not checked), then `docc merge` joins them under one landing page.
# DOCS_HOSTING_BASE_PATH, when the site is served below the root of its host (`/cloudsync`), is passed to DocC.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
work=.build/docs-work
site=.build/docs

$SWIFT build
bin=$(realpath "$($SWIFT build --show-bin-path)")
rm -rf "$work" "$site"
mkdir -p "$work"
# docc and swift-symbolgraph-extract of the same toolchain as $SWIFT.
$SWIFT -print-target-info >"$work/target.json"
target=$(python3 -c '
import json, os, sys
info = json.load(open(sys.argv[1]))
print(info["target"]["triple"], os.path.normpath(info["paths"]["runtimeResourcePath"] + "/../../bin"))
' "$work/target.json")
read -r triple tools <<<"$target"

# The library products (each is one module) and the system libraries' module maps and include paths, which loading
# the modules needs, from the package itself.
$SWIFT package dump-package >"$work/package.json"
products=$(python3 - "$work/package.json" <<'PY'
import json, os, sys
package = json.load(open(sys.argv[1]))
missing = []
for product in package["products"]:
    if "library" not in product["type"]:
        continue
    if len(product["targets"]) != 1:
        sys.exit(f"make-docs: the library product {product['name']} has {len(product['targets'])} targets; one catalog "
                 "per product needs one")
    module = product["targets"][0]
    if not os.path.isfile(f"Sources/{module}/{module}.docc/{module}.md"):
        missing.append(f"Sources/{module}/{module}.docc/{module}.md")
    print(module)
if missing:
    sys.exit(f"make-docs: every library product's module needs a landing page: {', '.join(missing)}")
PY
)
libraries=$(python3 -c '
import json, sys
print(" ".join(t["pkgConfig"] for t in json.load(open(sys.argv[1]))["targets"] if t.get("pkgConfig")))
' "$work/package.json")
includes=$(pkg-config --cflags-only-I $libraries)
extract_flags=()
for map in Sources/*/module.modulemap; do extract_flags+=(-Xcc "-fmodule-map-file=$PWD/$map"); done
for include in $includes; do extract_flags+=("$include"); done

for module in $products; do
    mkdir -p "$work/symbol-graphs/$module"
    "$tools/swift-symbolgraph-extract" -module-name "$module" -target "$triple" -I "$bin/Modules" \
        -module-cache-path "$bin/ModuleCache" "${extract_flags[@]}" -minimum-access-level public \
        -output-dir "$work/symbol-graphs/$module"
    cp -R "Sources/$module/$module.docc" "$work/$module.docc"
done

# The articles: catalog, article name, title (empty: the section's heading), page of docs/, and the section (its
# heading without the `## `; `top`: what comes before the page's first section; `all`: the whole page).
python3 - "$work" <<'PY'
import os, re, sys
work = sys.argv[1]
ARTICLES = [
    ("CloudSync", "GettingStarted", "Getting started", "docs/library.md", "top"),
    ("CloudSync", "ResolversAndReadRepair", "", "docs/library.md", "Resolvers and read repair"),
    ("CloudSync", "TheOutbox", "", "docs/library.md", "The outbox"),
    ("CloudSync", "WritingAProvider", "", "docs/writing-a-provider.md", "all"),
    ("CloudSyncCrypto", "EncryptionAtRest", "Encryption at rest", "docs/encryption.md", "all"),
    ("CloudSyncRunner", "PipelinesFromSwift", "Pipelines from Swift", "docs/library.md",
     "Pipelines from Swift (`CloudSyncRunner`)"),
    ("CloudSyncPipeline", "WritingAJob", "", "docs/writing-a-job.md", "all"),
    ("CloudSyncPipeline", "WritingAStateStore", "", "docs/writing-a-state-store.md", "all"),
]
FENCE = re.compile(r"^\s*```")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:")

def lines_outside_code(lines):
    """(index, line) of every line outside fenced code blocks."""
    fenced = False
    for index, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield index, line

def section(page, lines, which):
    headings = [(i, line) for i, line in lines_outside_code(lines) if re.match(r"#{1,2} ", line)]
    if which == "all":
        return lines
    if which == "top":
        end = next((i for i, line in headings if line.startswith("## ")), len(lines))
        return lines[:end]
    starts = [i for i, line in headings if line == "## " + which]
    if len(starts) != 1:
        sys.exit(f"make-docs: {page} has {len(starts)} sections '## {which}'; the articles in scripts/make-docs.sh "
                 "name sections by their heading")
    end = next((i for i, line in headings if i > starts[0]), len(lines))
    # The section's heading becomes the article's title, and its subsections come up a level.
    part = lines[starts[0]:end]
    for i, line in lines_outside_code(part):
        if re.match(r"#{2,6} ", line):
            part[i] = line[1:]
    return part

def unlink(page, text):
    """`[words](other.md#part)` -> `words (`docs/other.md#part`)`: the site has no page at that path."""
    def replace(match):
        words, target = match.group(1), match.group(2)
        if SCHEME.match(target):
            return match.group(0)
        path = page + target if target.startswith("#") else os.path.normpath(
            os.path.join(os.path.dirname(page), target))
        return f"`{path}`" if words.strip("`") in (path, os.path.basename(path)) else f"{words} (`{path}`)"
    # Code spans are left as they are: what is between backticks is never a link.
    spans = text.split("`")
    return "`".join(LINK.sub(replace, span) if n % 2 == 0 else span for n, span in enumerate(spans))

for catalog, name, title, page, which in ARTICLES:
    lines = open(page, encoding="utf-8").read().rstrip("\n").split("\n")
    part = section(page, lines, which)
    if not part or not part[0].startswith("# "):
        sys.exit(f"make-docs: {page}: the part '{which}' does not start with a heading")
    if title:
        part[0] = "# " + title
    for i, line in lines_outside_code(part):
        part[i] = unlink(page, line)
    with open(f"{work}/{catalog}.docc/{name}.md", "w", encoding="utf-8") as out:
        out.write("\n".join(part).rstrip("\n") + "\n")

# No relative link may be left, in an article or a landing page: DocC would keep it as an address relative to the
# page, which leads nowhere on the site, without a warning.
left = []
for directory, _, files in os.walk(work):
    for file in files:
        if file.endswith(".md"):
            lines = open(os.path.join(directory, file), encoding="utf-8").read().split("\n")
            # A landing page is named by its source, where its links are fixed.
            catalog = os.path.basename(directory)
            source = f"Sources/{catalog.removesuffix('.docc')}/{catalog}/{file}"
            where = source if os.path.exists(source) else os.path.join(directory, file)
            for i, line in lines_outside_code(lines):
                for span in line.split("`")[::2]:
                    left += [f"{where}:{i + 1}: ({m.group(2)})" for m in LINK.finditer(span)
                             if not SCHEME.match(m.group(2))]
if left:
    sys.exit("make-docs: relative links DocC cannot follow:\n" + "\n".join(left))
PY

# All at once: a conversion spends most of its second waiting, not computing.
pids=()
for module in $products; do
    "$tools/docc" convert "$work/$module.docc" --additional-symbol-graph-dir "$work/symbol-graphs/$module" \
        --output-path "$work/$module.doccarchive" --fallback-display-name "$module" \
        --fallback-bundle-identifier "$module" --fallback-default-module-kind Library --transform-for-static-hosting \
        ${DOCS_HOSTING_BASE_PATH:+--hosting-base-path "$DOCS_HOSTING_BASE_PATH"} \
        --warnings-as-errors --disable-parameters-and-returns-validation >"$work/$module.log" 2>&1 &
    pids+=($!)
done
failed=() archives=()
for module in $products; do
    if ! wait "${pids[${#archives[@]}]}"; then
        failed+=("$module")
        cat "$work/$module.log" >&2
    fi
    archives+=("$work/$module.doccarchive")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "make-docs: docc convert failed for ${failed[*]} (above)" >&2
    exit 1
fi
"$tools/docc" merge "${archives[@]}" --output-path "$site" --synthesized-landing-page-name CloudSync \
    --synthesized-landing-page-kind Package
# DocC's own page at the root says "not found"; the list of products is one level down.
echo '<!DOCTYPE html><meta http-equiv="refresh" content="0; url=documentation/">' >"$site/index.html"

# The site holds a page for every product and every article.
missing=()
for module in $products; do
    lower=$(tr '[:upper:]' '[:lower:]' <<<"$module")
    for page in "$work/$module.docc"/*.md; do
        name=$(basename "$page" .md | tr '[:upper:]' '[:lower:]')
        path=documentation/$lower$([ "$name" = "$lower" ] || echo "/$name")
        [ -f "$site/$path/index.html" ] && [ -f "$site/data/$path.json" ] || missing+=("$path")
    done
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "make-docs: the site lacks ${missing[*]}" >&2
    exit 1
fi
echo "make-docs: the documentation of ${#archives[@]} products is in $site; serve that directory" \
    "(python3 -m http.server -d $site) and open it" >&2
