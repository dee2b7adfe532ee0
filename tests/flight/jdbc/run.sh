#!/usr/bin/env bash
# Runs JdbcTest.java (or the program named as the first argument, e.g. ConnectUrl.java) against a
# running `iceflight serve` with the Arrow Flight SQL JDBC driver.
#
#   ICEFLIGHT_URI=grpc://127.0.0.1:PORT [ICEFLIGHT_USER=alice ICEFLIGHT_PASSWORD=secret] tests/flight/jdbc/run.sh
#   ICEFLIGHT_JDBC_URL=jdbc:arrow-flight-sql://... tests/flight/jdbc/run.sh ConnectUrl.java
#   tests/flight/jdbc/run.sh --fetch      resolves the driver jar only
#
# The driver jar (one shaded jar, no dependencies) is resolved into the local Maven repository
# (~/.m2, or $MAVEN_REPO_LOCAL) with `mvn dependency:get`; once it is there no network is needed.
# Version: $ICEFLIGHT_JDBC_VERSION, default 18.3.0 (the newest Maven Central serves; 19.0.0 of the
# other Arrow Java artifacts exists, but no flight-sql-jdbc-driver 19.0.0).
# Exit codes: 0 all checks passed, 1 a check failed, 2 bad setup, 77 the driver cannot be had (skip).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
export ICEFLIGHT_REPO=${ICEFLIGHT_REPO:-$repo}

version=${ICEFLIGHT_JDBC_VERSION:-18.3.0}
artifact=org.apache.arrow:flight-sql-jdbc-driver:$version
m2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
jar=$m2/org/apache/arrow/flight-sql-jdbc-driver/$version/flight-sql-jdbc-driver-$version.jar

# Java 17 or newer: $JAVA_HOME, else the Debian JDK 17, else `java` on PATH.
java=${JAVA_HOME:+$JAVA_HOME/bin/java}
if [ -z "$java" ] || [ ! -x "$java" ]; then
  if [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
    java=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    java=$(command -v java || true)
  fi
fi
if [ -z "$java" ]; then
  echo "jdbc/run.sh: no java found (apt-get install openjdk-17-jdk-headless)" >&2
  exit 2
fi

if [ ! -s "$jar" ]; then
  if ! command -v mvn >/dev/null; then
    echo "jdbc/run.sh: $jar is not cached and mvn is not installed (apt-get install maven)" >&2
    exit 2
  fi
  echo "jdbc/run.sh: resolving $artifact into $m2"
  log=$(mktemp)
  mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2" dependency:get -Dartifact="$artifact" -Dtransitive=false >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$jar" ]; then
    echo "jdbc/run.sh: SKIP: Maven could not resolve $artifact (mvn exit $rc):" >&2
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^\[ERROR\] .*[a-z]' | head -1 >&2 || tail -5 "$log" >&2
    rm -f "$log"
    exit 77
  fi
  rm -f "$log"
fi

# The source launcher compiles the program in memory. --add-opens lets Arrow's memory code reach
# java.nio on Java 17 (the first form for a module path, the second, the one iceflight's banner
# and README give, for the class path); without it the JVM hangs.
# $ICEFLIGHT_JAVA_OPTS replaces these flags (the demo test passes exactly the one its banner
# prints).
# `run.sh --fetch`: only resolve the driver (CI fetches it while it builds).
if [ "${1:-}" = "--fetch" ]; then
  exit 0
fi
program=${1:-JdbcTest.java}
opts=${ICEFLIGHT_JAVA_OPTS:---add-opens=java.base/java.nio=org.apache.arrow.memory.core,ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED}
# shellcheck disable=SC2086  # the options are split on purpose
exec timeout "${ICEFLIGHT_JDBC_TIMEOUT:-600}" "$java" $opts -cp "$jar" "$here/$program"
