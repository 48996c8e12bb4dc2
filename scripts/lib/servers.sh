# Sourced by scripts/run: it owns the servers it starts. Every port it will listen on is free
# before anything starts, and a server counts as ready only when the process scripts/run started
# holds the listening socket (and, for Redis, says its own pid): whatever else answers on a port
# is never taken for it. Linux only (/proc), like the rest of scripts/run.

# The inodes of the sockets listening on TCP port $1 at an address a bind to 127.0.0.1:$1 would
# clash with (or, with $2 = exact, at 127.0.0.1 itself): 127.0.0.1, 0.0.0.0, :: or
# ::ffff:127.0.0.1. /proc/net/tcp{,6}: "local_address" is ADDR:PORT in hex, state 0A is LISTEN,
# the tenth field the socket's inode.
listening_inodes() { # port [exact]
    local port_hex table tables=()
    port_hex=$(printf '%04X' "$1")
    # No IPv6 in the kernel: no tcp6 table.
    for table in /proc/net/tcp /proc/net/tcp6; do [ -r "$table" ] && tables+=("$table"); done
    awk -v port="$port_hex" -v exact="${2:-}" '
        $4 == "0A" {
            split($2, local_address, ":")
            if (local_address[2] != port) next
            address = local_address[1]
            if (address == "0100007F" || (exact == "" && (address ~ /^0+$/ ||
                address == "0000000000000000FFFF00000100007F")))
                print $10
        }' "${tables[@]}"
}

# Who holds socket inode $1, as "name (pid N)", when that process is this user's to look at.
socket_holder() { # inode
    local fd pid
    fd=$(find /proc/[0-9]*/fd -lname "socket:\[$1\]" -print -quit 2>/dev/null) || true
    [ -n "$fd" ] || return 0
    pid=${fd#/proc/}
    pid=${pid%%/*}
    echo "$(cat "/proc/$pid/comm" 2>/dev/null || echo "?") (pid $pid)"
}

# Every NAME=PORT given is a distinct port with no listener on it, or the run stops here, before
# it has started anything, naming the port and the variable that moves it.
check_ports_free() { # VARIABLE=port...
    local pair variable port seen=" "
    for pair in "$@"; do
        variable=${pair%%=*}
        port=${pair#*=}
        if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
            echo "run: $variable=$port is not a TCP port" >&2
            exit 1
        fi
        if [[ $seen == *" $port="* ]]; then
            local other=${seen#*" $port="}
            echo "run: $variable and ${other%% *} are both port $port; give each its own port" >&2
            exit 1
        fi
        seen+="$port=$variable "
        ! port_taken "$variable" "$port" || exit 1
    done
}

# Whether a process listens on $2: if so, says so, naming the variable $1 that moves it.
port_taken() { # VARIABLE port
    local inode holder
    for inode in $(listening_inodes "$2"); do
        holder=$(socket_holder "$inode")
        echo "run: port $2 ($1) is already in use${holder:+ by $holder}; stop it, or run on another port: $1=<free port> scripts/run" >&2
        return 0
    done
    return 1
}

# Process $1 is running (not exited, not a zombie waiting to be reaped).
alive() { # pid
    [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}

# Process $1 holds the socket listening on 127.0.0.1:$2.
holds_port() { # pid port
    local inode
    for inode in $(listening_inodes "$2" exact); do
        [ -n "$(find "/proc/$1/fd" -lname "socket:\[$inode\]" -print -quit 2>/dev/null)" ] && return 0
    done
    return 1
}

# Waits until process $pid, started by scripts/run, holds every port given (VARIABLE=port) and
# `probe` (a command, talking to it through those ports) succeeds. Stops the run if it exits first
# or takes too long, naming a port another process took meanwhile (after check_ports_free).
wait_ready() { # what pid log "VARIABLE=port..." probe...
    local what=$1 pid=$2 log=$3 pairs=$4 pair held
    shift 4
    local deadline=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if ! alive "$pid"; then
            for pair in $pairs; do port_taken "${pair%%=*}" "${pair#*=}" && exit 1; done
            echo "run: $what exited before it was ready; see $log" >&2
            exit 1
        fi
        held=1
        for pair in $pairs; do
            holds_port "$pid" "${pair#*=}" || { held=0; break; }
        done
        [ "$held" = 1 ] && "$@" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    for pair in $pairs; do
        holds_port "$pid" "${pair#*=}" && continue
        port_taken "${pair%%=*}" "${pair#*=}" && exit 1
    done
    echo "run: $what did not come up on $pairs within 60 s; see $log" >&2
    exit 1
}

# Redis's own answer names the process that gives it: ready when that is the one started here.
redis_is() { # port pid
    redis-cli -h 127.0.0.1 -p "$1" info server | tr -d '\r' | grep -qx "process_id:$2"
}
