#!/usr/bin/env bash
# The real sites of scripts/bench/sites.py ("Pages, not templates"), rebuilt from Debian's
# documentation packages: each package is fetched with `apt-get download` and unpacked with
# `dpkg-deb` into a work directory (nothing is installed on the system), the site's HTML
# directory is served on loopback by `python3 -m http.server`, and GNU Wget crawls it
# recursively into SITES_DIR/NAME.warc.gz (one gzip member per record; kernel-docs
# uncompressed, as first made), after which the server is stopped.
#
# Every site is crawled alike, with the arguments first used for the kernel docs:
# stylesheets, scripts, fonts, images, text files and Sphinx's _sources, _static, _images,
# _downloads and search index are rejected, so the archives hold the pages (HTML, and a
# directory listing where a directory has no index.html). The packages' names and versions,
# the pages and the bytes of each archive go to SITES_DIR/sites-manifest.tsv.
#
# usage: scripts/bench/sites_crawl.sh [NAME...]   # default: every site below
# env:   SITES_DIR (target/bench-sites)  where the WARCs and the manifest go
#        SITES_WORK (/tmp/neardup-sites-work)  packages, unpacked trees, mirrors, wget logs
#        FORCE=1  crawl again a site whose WARC exists (default: keep it, say so)
# needs: apt-get (Debian 12 "bookworm" package lists; `apt-get update` is run when a download
#        fails), dpkg-deb, python3, wget (1.21: WARC). About 40 s for the 13 sites here,
#        150 MB of archives (kernel-docs 125 MB).
set -euo pipefail
SITES_DIR=${SITES_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/target/bench-sites}
WORK=${SITES_WORK:-/tmp/neardup-sites-work}
FORCE=${FORCE:-0}

# name | loopback port (fixed, so that URLs are the same on every rebuild) | package |
# the site's directory in the package | start path | kind
SITES="
kernel-docs|8081|linux-doc-6.1|usr/share/doc/linux-doc-6.1/html|index.html|Sphinx, Read the Docs theme
handbook|8082|debian-handbook|usr/share/doc/debian-handbook/html||manual (Publican DocBook, 12 languages)
python-docs|8083|python3.11-doc|usr/share/doc/python3.11/html|index.html|Sphinx, Python docs theme
sphinx-docs|8084|sphinx-doc|usr/share/doc/sphinx-doc/html|index.html|Sphinx, sphinx13 theme
debian-policy|8085|debian-policy|usr/share/doc/debian-policy||Sphinx and DocBook, a directory listing
rust-book|8086|rust-doc|usr/share/doc/rust-doc/html/book|index.html|mdBook
rust-unstable-book|8087|rust-doc|usr/share/doc/rust-doc/html/unstable-book|index.html|mdBook, mostly stubs
debian-reference|8088|debian-reference-en|usr/share/debian-reference|index.en.html|manual (DocBook)
gettext-manual|8089|gettext-doc|usr/share/doc/gettext|index.html|manual (Texinfo), small javadoc
git-manual|8090|git-doc|usr/share/doc/git-doc|index.html|manual pages (AsciiDoc)
commons-lang3-api|8091|libcommons-lang3-java-doc|usr/share/doc/libcommons-lang3-java/api|index.html|mostly template (javadoc)
jsoncpp-api|8092|libjsoncpp-doc|usr/share/doc/libjsoncpp-doc|index.html|mostly template (Doxygen)
rustdoc-crates|8093|cargo-doc|usr/share/doc/cargo/doc||mostly template (rustdoc), directory listings
"
REJECT="*.png,*.svg,*.js,*.css,*.woff,*.woff2,*.ttf,*.jpg,*.gif,*.ico,*.txt,*.gz,*.pdf,*.epub,*.zip,*.yaml"
REJECT_REGEX="(_sources|_downloads|_images|_static|searchindex)"

# Downloads PACKAGE's .deb into $WORK/debs (once) and prints its path.
fetch_deb() {
  local pkg=$1
  mkdir -p "$WORK/debs"
  local deb; deb=$(ls "$WORK/debs/${pkg}_"*.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    (cd "$WORK/debs" && { apt-get download -o APT::Sandbox::User=root "$pkg" ||
      { apt-get update -qq && apt-get download -o APT::Sandbox::User=root "$pkg"; }; } >&2)
    deb=$(ls "$WORK/debs/${pkg}_"*.deb | head -1)
  fi
  echo "$deb"
}

# Unpacks DIR (a directory inside PACKAGE) into $WORK/root/PACKAGE and prints its path there.
unpack() {
  local pkg=$1 dir=$2 root=$WORK/root/$1
  if [ ! -d "$root/$dir" ]; then
    local deb; deb=$(fetch_deb "$pkg")
    mkdir -p "$root"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" "./$dir"
  fi
  echo "$root/$dir"
}

# Serves DIR on 127.0.0.1:PORT in the background; sets SERVER_PID; waits until it answers.
serve() {
  local dir=$1 port=$2
  if wget -q --tries=1 -O /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
    echo "port $port is in use: stop what serves it, then run again" >&2
    return 1
  fi
  python3 -m http.server --bind 127.0.0.1 --directory "$dir" "$port" >"$WORK/logs/server-$port.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    wget -q --tries=1 -O /dev/null "http://127.0.0.1:$port/" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the server on port $port did not start" >&2
  return 1
}

stop_server() {
  if [ -n "${SERVER_PID:-}" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}
trap stop_server EXIT

# Crawls http://127.0.0.1:PORT/START into SITES_DIR/NAME.warc[.gz]; wget's 8 (some
# responses were errors: links to files outside the package) is expected.
crawl() {
  local name=$1 port=$2 start=$3 compression=()
  [ "$name" = kernel-docs ] && compression=(--no-warc-compression)
  rm -rf "$WORK/mirror/$name"
  local rc=0
  wget --recursive --level=inf --no-parent --no-verbose -o "$WORK/logs/wget-$name.log" \
    --reject "$REJECT" --reject-regex "$REJECT_REGEX" "${compression[@]}" \
    --warc-file="$SITES_DIR/$name" -P "$WORK/mirror/$name" "http://127.0.0.1:$port/$start" || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 8 ]; then
    echo "wget failed on $name (exit $rc): $WORK/logs/wget-$name.log" >&2
    return 1
  fi
}

# One line of the manifest: name, package, version, pages (responses), WARC bytes, kind.
manifest_line() {
  local name=$1 pkg=$2 kind=$3 warc=$4
  local version; version=$(dpkg-deb -f "$(fetch_deb "$pkg")" Version)
  local pages; pages=$(grep -c " URL:http.* -> " "$WORK/logs/wget-$name.log" || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$pkg" "$version" "$pages" "$(stat -c %s "$warc")" "$kind"
}

build_site() {
  local name=$1 port=$2 pkg=$3 dir=$4 start=$5 kind=$6
  local warc=$SITES_DIR/$name.warc.gz
  [ "$name" = kernel-docs ] && warc=$SITES_DIR/$name.warc
  if [ -f "$warc" ] && [ "$FORCE" != 1 ]; then
    echo "$name: $warc exists, kept (FORCE=1 crawls it again)"
    return 0
  fi
  local root; root=$(unpack "$pkg" "$dir")
  serve "$root" "$port"
  local t0=$SECONDS
  crawl "$name" "$port" "$start"
  stop_server
  local manifest=$SITES_DIR/sites-manifest.tsv
  { grep -v "^$name	" "$manifest" || true; manifest_line "$name" "$pkg" "$kind" "$warc"; } >"$manifest.new"
  mv "$manifest.new" "$manifest"
  echo "$name: $warc, $(du -h "$warc" | cut -f1), $((SECONDS - t0)) s"
}

main() {
  mkdir -p "$SITES_DIR" "$WORK/logs"
  [ -f "$SITES_DIR/sites-manifest.tsv" ] ||
    printf 'name\tpackage\tversion\tfetched\twarc_bytes\tkind\n' >"$SITES_DIR/sites-manifest.tsv"
  local wanted=" $* " found=0
  while IFS='|' read -r name port pkg dir start kind; do
    [ -n "$name" ] || continue
    if [ $# -gt 0 ] && [[ "$wanted" != *" $name "* ]]; then continue; fi
    found=$((found + 1))
    build_site "$name" "$port" "$pkg" "$dir" "$start" "$kind" </dev/null
  done <<<"$SITES"
  [ "$found" -gt 0 ] || { echo "no such site: $*" >&2; exit 2; }
}

main "$@"
