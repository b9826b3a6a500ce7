# bench/lib.sh — what several bench scripts do alike; sourced, not run.
#
#   freeport                      a free loopback TCP port
#   as_pg CMD…                    CMD as the postgres user when run as root (PostgreSQL
#                                 refuses root), else as is
#   pg_bin                        sets $bin to the newest Debian PostgreSQL binaries, or
#                                 exits with one line saying how to install them
#   pg_start DIR PORT [OPT…]      a throwaway cluster in DIR/data on 127.0.0.1:PORT (the
#                                 socket in DIR, the log DIR/log), with -c OPTs added
#   bench_tokens DIR              a fresh bearer token in $token, and DIR/tokens.yaml
#                                 giving it agent:bench (owner human:alice) with
#                                 DIR/grants.yaml

freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pg_bin() {
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$bin/initdb" ] || { echo "no PostgreSQL binaries under /usr/lib/postgresql: apt-get install postgresql" >&2; exit 1; }
}

pg_start() {
  local dir=$1 port=$2 opts="" o
  shift 2
  for o in "$@"; do opts+=" -c $o"; done
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null
  as_pg timeout 150 "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 120 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1$opts" start >/dev/null
}

bench_tokens() {
  token="sharedos_bench$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  cat > "$1/tokens.yaml" <<YAML
version: 1
tokens:
  - id: bench
    sha256: $(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
    context: {actor: agent:bench, owner: human:alice}
    grants: [grants.yaml]
YAML
}
