#!/bin/sh
# fetch-ptxas.sh DIR [SUITE]: download Debian's non-free nvidia-cuda-toolkit
# package (bookworm: ptxas 11.8; trixie: 12.4) with a private apt
# configuration (the system's apt setup is not touched) and extract only
# DIR/usr/bin/ptxas. Used by .ci/run to validate the committed PTX offline;
# NVIDIA binaries are never committed.
set -eu
D=$(mkdir -p "$1" && cd "$1" && pwd)
A=$D/apt
mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
M=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$M" ] || M=http://deb.debian.org/debian
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $M ${2:-bookworm} non-free" >"$A/sources.list"
printf 'Dir::Etc::sourcelist "%s";\nDir::Etc::sourceparts "-";\nDir::State::Lists "%s";\nDir::Cache "%s";\n' \
	"$A/sources.list" "$A/lists" "$A/cache" >"$A/apt.conf"
export APT_CONFIG="$A/apt.conf"
apt-get -qq update
cd "$D"
apt-get -qq download nvidia-cuda-toolkit
dpkg-deb --fsys-tarfile nvidia-cuda-toolkit_*.deb | tar -x ./usr/bin/ptxas
rm -f nvidia-cuda-toolkit_*.deb
"$D/usr/bin/ptxas" --version | tail -1
