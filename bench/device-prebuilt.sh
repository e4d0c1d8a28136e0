# Sourced by the device scripts that run binaries built on the development
# machine (bench/gpu-lm.sh, gpu-tp.sh, gpu-walk.sh): $OUT made, the carried
# Debian packages installed, device-carry/bin.tgz unpacked to /tmp/bin, and
# the fixtures where the tests were built to look for them.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
dpkg -i --force-depends device-carry/debs/*.deb >/dev/null 2>&1
tar xf device-carry/bin.tgz -C /tmp || { echo "no device-carry/bin.tgz"; exit 1; }
mkdir -p /work/shared/fixtures && ln -sfn "$PWD/device-carry/fixtures/hf" /work/shared/fixtures/hf
[ -e /work/main ] || ln -s "$PWD" /work/main
