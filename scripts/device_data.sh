# Sourced by the device scripts: puts the data set at $data on the lent GPU machine (there is no
# ../shared there). Its three parts (split -n 3 of ../shared/data/tiny-imagenet-200.tar.gz, each under the
# 64 MiB a call may carry) arrive in /root/parts/ or .gpu/, one call at a time; the joined file is checked
# against the README's SHA-256 before use.
data=../shared/data/tiny-imagenet-200.tar.gz
sha=373810002cccd58cc4de79415e73072e6afd14a896072c9d268ad6854156ac35   # ../shared/data/README.md
export PYTHONUNBUFFERED=1

if [ ! -f "$data" ]; then
  mkdir -p ../shared/data /root/parts
  cp .gpu/ti.part* /root/parts/ 2>/dev/null || true
  cat /root/parts/ti.part0 /root/parts/ti.part1 /root/parts/ti.part2 > "$data.tmp"
  echo "$sha  $data.tmp" | sha256sum -c --quiet
  mv "$data.tmp" "$data"
fi
