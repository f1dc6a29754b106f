#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian package from the tree `make install` staged with
# PREFIX=/usr UNITDIR=/lib/systemd/system in DIR/root (make deb does both),
# then checks it with lintian: any error or warning fails.
#   scripts/deb.sh DIR VERSION MAINTAINER
# Writes DIR/httpdcnode_VERSION_ARCH.deb. The maintainer scripts are those
# of scripts/deb/ (the user httpdcnode, /etc/httpdcnode and its two files).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(realpath -m "$1") version=$2 maintainer=$3
root=$dir/root
arch=$(dpkg --print-architecture)
deb=$dir/httpdcnode_${version}_$arch.deb
doc=$root/usr/share/doc/httpdcnode
if [[ ! -x $root/usr/bin/httpdcnode ]]; then
  echo "deb: no $root/usr/bin/httpdcnode: run make deb, which stages it first" >&2
  exit 1
fi
if [[ ! $maintainer =~ ^[^\<\>]+\ \<[^@\<\>\ ]+@[^@\<\>\ ]+\>$ ]]; then
  echo "deb: the maintainer must be 'Name <mail>', not '$maintainer': make deb DEB_MAINTAINER='...'" >&2
  exit 1
fi
# The date of the last commit, so that the same tree makes the same package.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

# As dh_strip and dh_compress would: no symbols, man page and changelog gzipped.
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/httpdcnode"
gzip -9nf "$root/usr/share/man/man1/httpdcnode.1"
rm -f "$doc/LICENSE"                    # the copyright file says it
years=$(git log --reverse --format=%cd --date=format:%Y 2>/dev/null | sed -n '1p;$p' | uniq |
        paste -sd-)
years=${years:-$(date -u +%Y -d "@$SOURCE_DATE_EPOCH")}
cat >"$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: httpdcnode

Files: *
Copyright: $years the httpdcnode authors
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this file except in compliance with the License. You may obtain a copy of
 the License at http://www.apache.org/licenses/LICENSE-2.0
 .
 On Debian systems, the complete text of the Apache License 2.0 can be found
 in /usr/share/common-licenses/Apache-2.0.
COPYRIGHT
{
  printf 'httpdcnode (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Built from commit %s.\n\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"

# The libraries the binary links, as dpkg-shlibdeps finds them (it wants a
# debian/control beside it).
shl=$dir/shlibdeps
mkdir -p "$shl/debian"
printf 'Source: httpdcnode\n\nPackage: httpdcnode\nArchitecture: any\n' >"$shl/debian/control"
libs=$(cd "$shl" && dpkg-shlibdeps -O "$root/usr/bin/httpdcnode" 2>"$shl/err") || {
  cat "$shl/err" >&2; exit 1; }
libs=${libs#shlibs:Depends=}

install -D -m 644 scripts/deb/lintian-overrides "$root/usr/share/lintian/overrides/httpdcnode"
mkdir -p "$root/DEBIAN"
install -m 755 scripts/deb/postinst scripts/deb/prerm scripts/deb/postrm "$root/DEBIAN/"
cat >"$root/DEBIAN/control" <<CONTROL
Package: httpdcnode
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $libs, adduser
Suggests: erlang-nox
Section: net
Priority: optional
Description: comet push server with an Erlang C-node
 httpdcnode holds streaming HTTP connections (chunked, Server-Sent Events,
 long-poll, WebSocket) open for the browsers of an Erlang system, and writes
 to each the messages Erlang nodes send to it: it is an Erlang C-node.
 .
 The package has the server, its systemd unit (not enabled), its manual,
 the Erlang application that routes messages from the master nodes
 (/usr/lib/erlang/lib/httpdcnode-$version), the browser client
 (/usr/share/httpdcnode/httpdcnode.js) and examples.
CONTROL
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
   xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control"

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "deb: $deb"
if command -v lintian >/dev/null; then
  lintian --fail-on error,warning "$deb"
  echo "deb: lintian found no error and no warning"
else
  echo "deb: lintian is not installed (scripts/install-deps.sh installs it): not checked" >&2
  exit 1
fi
