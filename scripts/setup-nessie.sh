#!/usr/bin/env bash
# Fetches Nessie's server once (the second Iceberg REST implementation the tests commit to,
# server/tests/nessie.rs) from Maven Central with Maven (`dependency:copy`, which checks the
# artifact's checksum), and prints "<jar> <java>": the runner jar and a Java 21+ to run it with
# (Nessie 0.99 needs 21; the machine's default Java is 17).
# Location: $ICEFLIGHT_NESSIE_DIR, default $HOME/.cache/iceflight-nessie; Maven's repository:
# $MAVEN_REPO_LOCAL, default ~/.m2/repository.
set -euo pipefail
version=0.99.0
dir=${ICEFLIGHT_NESSIE_DIR:-$HOME/.cache/iceflight-nessie}
jar="$dir/nessie-quarkus-$version-runner.jar"
if [ ! -s "$jar" ]; then
  mkdir -p "$dir"
  m2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
  log=$(mktemp)
  if ! mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2" dependency:copy \
      -Dartifact="org.projectnessie.nessie:nessie-quarkus:$version:jar:runner" \
      -DoutputDirectory="$dir" -Dmdep.overWriteIfNewer=true >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "scripts/setup-nessie.sh: Maven could not fetch nessie-quarkus $version (runner)" >&2
    exit 1
  fi
  rm -f "$log"
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
