#!/bin/sh
# deploy/packages.sh [--install] [--out DIR]
#
# Builds ember's Debian packages from debian/ (dpkg-buildpackage -b: ember,
# libember0, libember-dev, python3-ember and the -dbgsym packages), copies
# them with the .changes and .buildinfo into DIR (default build-deb-pkgs/),
# runs lintian on the .changes (fails on any E: tag) and lists what each
# package holds. With --install it then installs them with apt-get and checks
# the installed system: an embedded alignment with /usr/bin/ember, ember-nam
# --check-config on /etc/ember/nam.conf, the Python module with
# /usr/bin/python3, and a C program built with pkg-config against
# libember-dev (shared, then static).
# Run as root on Debian 12 (or with sudo available), from anywhere.
set -eu
cd "$(dirname "$0")/.."

install=0
out=build-deb-pkgs
while [ $# -gt 0 ]; do
  case $1 in
    --install) install=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --out=*) out=${1#--out=} ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "packages: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_install() {
  echo "packages: installing $*"
  [ -n "${apt_updated:-}" ] || { $SUDO apt-get update -qq; apt_updated=1; }
  # shellcheck disable=SC2086 # $SUDO is empty or one word
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

# The packaging tools (and Debian's MrBayes, which the installed
# libember-beagle is checked under), then whatever debian/control's Build-Depends lacks
# (dpkg-checkbuilddeps lists it: "a (>= 1) | b, c" -> install a and c).
tools=""
for p in build-essential dpkg-dev debhelper fakeroot lintian mrbayes; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    tools="$tools $p"
done
# shellcheck disable=SC2086 # a list of package names
[ -z "$tools" ] || apt_install $tools
if ! unmet=$(dpkg-checkbuilddeps 2>&1); then
  deps=$(printf '%s\n' "$unmet" | sed -n 's/.*Unmet build dependencies: //p' |
         sed -e 's/([^)]*)//g' -e 's/|[^,]*//g' -e 's/\[[^]]*\]//g' -e 's/<[^>]*>//g' |
         tr ',' ' ')
  [ -n "$deps" ] || { printf '%s\n' "$unmet" >&2; exit 1; }
  # shellcheck disable=SC2086
  apt_install $deps
  dpkg-checkbuilddeps
fi

# Build. dpkg-buildpackage writes next to the source tree (..); the files it
# made are named in debian/files (and the .changes after them), and move to
# $out.
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
changes=ember_${version}_${arch}.changes
echo "== packages: dpkg-buildpackage -us -uc -b (ember $version, $arch)"
dpkg-buildpackage -us -uc -b -j"$(nproc)"
mkdir -p "$out"
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
for f in $(awk '{print $1}' debian/files) "$changes"; do
  mv "../$f" "$out/"
done
debian/rules clean >/dev/null 2>&1 || true

echo "== packages: lintian $out/$changes"
lint=$(lintian -I --fail-on none "$out/$changes" 2>&1 |
       grep -v '^running with root privileges') || true
printf '%s\n' "${lint:-(no tags)}"
if printf '%s\n' "$lint" | grep -q '^E:'; then
  echo "packages: lintian reports errors" >&2
  exit 1
fi

echo "== packages: contents"
for deb in "$out"/*.deb; do
  name=$(dpkg-deb -f "$deb" Package)
  files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./|/|')
  echo "-- $(basename "$deb"): $(printf '%s\n' "$files" | grep -c .) files," \
       "$(du -k "$deb" | cut -f1) KiB"
  case $name in
    *-dbgsym) ;;  # only build-id debug files
    *) printf '%s\n' "$files" | sed 's/^/   /' ;;
  esac
done

[ "$install" -eq 1 ] || exit 0

echo "== packages: install"
debs=""
for deb in "$out"/*.deb; do
  case $(dpkg-deb -f "$deb" Package) in *-dbgsym) continue ;; esac
  case $deb in /*) ;; *) deb=./$deb ;; esac
  debs="$debs $deb"
done
# shellcheck disable=SC2086 # a list of paths without spaces
# --reinstall: a rebuild keeps the version, and apt would skip it otherwise
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --reinstall $debs

echo "== packages: check the installed packages"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=$(pwd)/tests/data/sw

/usr/bin/ember align --embedded --query "$data/dna_queries.fa" \
  --ref "$data/dna_refs.fa" >"$tmp/align.tsv"
pairs=$(grep -c '^>' "$data/dna_queries.fa")
lines=$(awk 'NR > 1 && NF >= 7' "$tmp/align.tsv" | wc -l)  # after the header
echo "ember align --embedded: $lines results for $pairs pairs"
[ "$lines" -eq "$pairs" ] || { echo "packages: expected $pairs results" >&2; exit 1; }

# ember lnl: IQ-TREE's example alignment under GTR+G4 against BEAGLE's
# double-precision log-likelihood (tests/data/plf/reference_lnl.tsv)
plf=$(pwd)/tests/data/plf
/usr/bin/ember lnl --embedded --alignment "$plf/example.phy" \
  --trees "$plf/example.tree" \
  --model 'GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}' >"$tmp/lnl.tsv"
got=$(awk 'NR == 2 { print $2 }' "$tmp/lnl.tsv")
awk -v g="$got" 'BEGIN { d = (g + 21911.7352966684) / 21911.7352966684;
  exit !(d < 1e-10 && d > -1e-10) }' ||
  { echo "packages: ember lnl gave '$got', BEAGLE -21911.7352966684" >&2; exit 1; }
echo "ember lnl --embedded: $got (BEAGLE: -21911.7352966684)"

# ember beagle: the installed libember-beagle under Debian's MrBayes
cp "$plf/primates.nex" "$tmp/"
printf '%s\n' 'begin mrbayes;' \
  '  set autoclose=yes nowarn=yes seed=7 swapseed=7 usebeagle=yes beagleprecision=double;' \
  '  execute primates.nex;' '  lset nst=6 rates=gamma;' \
  '  mcmc ngen=200 samplefreq=100 printfreq=100 nchains=1 nruns=1 diagnfreq=1000000;' \
  '  quit;' 'end;' >"$tmp/batch.nex"
(cd "$tmp" && /usr/bin/ember beagle --embedded -- mb batch.nex >mb.txt 2>&1) ||
  { tail -n 20 "$tmp/mb.txt" >&2; echo "packages: mb under ember beagle failed" >&2; exit 1; }
grep -q 'Using BEAGLE v.*-ember-' "$tmp/mb.txt" ||
  { echo "packages: mb did not use libember-beagle" >&2; exit 1; }
echo "ember beagle --embedded -- mb: ok ($(grep -c '^ *[0-9]* -- [[(]*-[0-9]' "$tmp/mb.txt") chain lines)"

# ember train: the shipped LeNet on the 200 training and 100 test images
# of tests/data/cnn/small, in-process, two stages, 5 epochs: it must learn
# (test accuracy 0.63 to 0.71 seen over seeds 1 to 6; chance is 0.10)
/usr/bin/ember train --embedded --net /usr/share/ember/nets/lenet.cfg \
  --data tests/data/cnn/small --stages 2 --epochs 5 --batch 20 --sync \
  --seed 1 >"$tmp/train.txt"
acc=$(sed -n 's/^test accuracy //p' "$tmp/train.txt")
awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.55) }' ||
  { cat "$tmp/train.txt" >&2
    echo "packages: ember train reached test accuracy '$acc', below 0.55" >&2
    exit 1; }
echo "ember train --embedded (lenet.cfg, 2 stages, 5 epochs): test accuracy $acc"

/usr/sbin/ember-nam --config /etc/ember/nam.conf --check-config
echo "ember-nam --config /etc/ember/nam.conf --check-config: ok"

(cd "$tmp" && /usr/bin/python3 -c 'import ember; print("python3: ember", ember.version(), "from", ember.__file__)')
# the installed binding's ember.lnl on the same alignment, in-process
(cd "$tmp" && /usr/bin/python3 - "$plf" <<'PY'
import sys, ember
plf = sys.argv[1]
with ember.connect("embedded") as c:
    lnl = c.lnl(plf + "/example.phy", plf + "/example.tree",
                "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}")
assert abs(lnl[0] + 21911.7352966684) < 1e-10 * 21911.7352966684, lnl
print("python3: ember lnl %.10f (BEAGLE: -21911.7352966684)" % lnl[0])
PY
)

# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -Wall -Wextra -Werror -o "$tmp/hello_shared" tests/install/hello_ember.c \
  $(pkg-config --cflags --libs ember)
"$tmp/hello_shared"
# /lib is /usr/lib on a merged-/usr system
ldd "$tmp/hello_shared" | grep -Eq "=> (/usr)?/lib/[^ ]*/libember\.so\.0 " ||
  { echo "packages: hello_shared does not use the installed libember.so.0" >&2; exit 1; }
libdir=$(pkg-config --variable=libdir ember)
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -Wall -Wextra -Werror -o "$tmp/hello_static" tests/install/hello_ember.c \
  $(pkg-config --cflags ember) "$libdir/libember.a" \
  $(pkg-config --static --libs-only-other --libs-only-l ember | sed 's/-lember\b//')
"$tmp/hello_static"
echo "C program against libember-dev (pkg-config, shared and static): ok"
echo "packages: all good ($out)"
