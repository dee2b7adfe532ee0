#!/usr/bin/env bash
# Fetches Nessie's server once (the second Iceberg REST implementation the tests commit to,
# server/tests/nessie.rs) from Maven Central, checks it against Central's SHA-1, and prints
# "<jar> <java>": the runner jar and a Java 21+ to run it with (Nessie 0.99 needs 21; the
# machine's default Java is 17).
# Location: $ICEFLIGHT_NESSIE_DIR, default $HOME/.cache/iceflight-nessie.
set -euo pipefail
version=0.99.0
dir=${ICEFLIGHT_NESSIE_DIR:-$HOME/.cache/iceflight-nessie}
jar="$dir/nessie-quarkus-$version-runner.jar"
if [ ! -s "$jar" ]; then
  mkdir -p "$dir"
  url="https://repo1.maven.org/maven2/org/projectnessie/nessie/nessie-quarkus/$version/nessie-quarkus-$version-runner.jar"
  curl -sSfL --retry 3 -o "$jar.part" "$url"
  want=$(curl -sSfL --retry 3 "$url.sha1" | cut -c1-40)
  got=$(sha1sum "$jar.part" | cut -d' ' -f1)
  if [ "$want" != "$got" ]; then
    echo "scripts/setup-nessie.sh: $url has SHA-1 $got, Maven Central says $want" >&2
    exit 1
  fi
  mv "$jar.part" "$jar"
fi
java=
for candidate in ${ICEFLIGHT_NESSIE_JAVA:-} /usr/lib/jvm/temurin-2[5-9]*/bin/java /usr/lib/jvm/*-2[1-9]*/bin/java; do
  if [ -x "$candidate" ]; then java=$candidate; break; fi
done
if [ -z "$java" ]; then
  echo "scripts/setup-nessie.sh: no Java 21 or newer under /usr/lib/jvm (set ICEFLIGHT_NESSIE_JAVA)" >&2
  exit 1
fi
echo "$jar $java"
